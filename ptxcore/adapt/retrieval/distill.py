"""Notes distillation: a teacher model turns each (wrong, fixed) pair into structured instruction notes.

One single-turn call per pair (any `LLMClient`: litellm through `ptxcore.agent.llm.LiteLLMClient`, the
`replay/...` model in tests). The teacher sees the task context, the wrong kernel with its feedback and
the fixed kernel, and must answer with one JSON object: a summary, 1-8 instruction notes (it is asked
for 3-8) and tags. Answers that are not such an object are recorded as failures with a one-line reason
(and no record); errors of the client itself (after its own retries) propagate.
"""

from __future__ import annotations

import json
import logging
import re
from collections import defaultdict
from collections.abc import Callable, Collection, Sequence
from typing import Any

from pydantic import Field, ValidationError

from ptxcore.agent.types import CallContext, LLMClient
from ptxcore.schema import FrozenModel, text_sha256

from .models import DistilledNotes, InstructionNote, NoteRecord, RepairPair

log = logging.getLogger(__name__)

DISTILL_VARIANT = "repair-notes"
"""The prompt-variant name the teacher calls carry (replay libraries key on it)."""
TASK_CONTEXT_CHARS = 60_000
"""Longest task context passed to the teacher (the knowledge pack can be long)."""

SYSTEM_PROMPT = """\
You study repairs of CUDA kernels that use inline PTX and write down how the primitives involved must be
used. Compare the wrong kernel with its fixed version and extract instruction-usage contracts that would
help someone use the same primitive correctly in a different kernel: operand order and types, address
spaces, immediates, descriptor fields, the sequence of instructions that must go together, shape and layout
preconditions, the diagnostics the mistake produces, and small valid and invalid examples. Do not write a
replacement kernel and do not give optimisation advice.

## Task context of the failing kernel
{task_context}"""

USER_PROMPT = """\
Problem: {problem} ({arch}).

## Wrong kernel (verdict: {status})
```cpp
{wrong_kernel}
```

## Feedback the wrong kernel received
{feedback}

## Fixed kernel (verified correct)
```cpp
{fixed_kernel}
```

## Answer
Reply with one JSON object and nothing else:
{{
  "summary": "one sentence: what was wrong and how the fix repairs it",
  "instruction_notes": [
    {{
      "instruction": "the CUDA / PTX / API primitive or instruction family",
      "shape_context": "dtype, rank, tile, layout or alignment under which the example is legal",
      "correct_example": "a minimal, complete, valid use of the primitive",
      "wrong_example": "a minimal invalid use, as in the wrong kernel",
      "operand_contract": ["operand order, address spaces, immediates or descriptor fields that must hold"],
      "required_sequence": ["instructions or calls that must appear together, in order"],
      "diagnostics": ["compiler, runtime or profiler messages this note explains"],
      "do_not_do": ["a specific invalid shortcut to avoid"],
      "example_completeness": "complete or partial",
      "missing_details": ["what the example leaves out; empty when complete"]
    }}
  ],
  "tags": ["short-topic"]
}}
Write 3 to 8 notes. Notes must be about using primitives correctly, reusable outside this operator (the
problem name is context only). Keep exact operands, qualifiers, immediates, synchronisation order and
shape constraints. No "..." inside correct_example: when the kernels do not show every operand, mark the
note partial and list what is missing instead of inventing it. Report only what the feedback shows; do
not invent measurements. No long code quotes."""

_FENCED = re.compile(r"```(?:json)?\s*(\{.*\})\s*```", re.DOTALL)
_NOTE_FIELDS = set(InstructionNote.model_fields)
_TOP_FIELDS = set(DistilledNotes.model_fields)


class NoteFailure(FrozenModel):
    """A pair the teacher gave no usable notes for."""

    pair_id: str
    """The pair."""
    reason: str
    """One line: why the answer was refused."""


class NotesCollection(FrozenModel):
    """The outcome of distilling a batch of pairs."""

    records: list[NoteRecord] = Field(default_factory=list)
    """One record per pair with usable notes, in input order."""
    failures: list[NoteFailure] = Field(default_factory=list)
    """Pairs without usable notes."""
    skipped: list[str] = Field(default_factory=list)
    """Pair ids skipped because they were done before (resume)."""


def distill_messages(pair: RepairPair) -> list[dict[str, str]]:
    """The teacher's system and user messages for one pair."""
    context = pair.task_prompt[:TASK_CONTEXT_CHARS] or f"Problem {pair.problem} on {pair.arch}."
    user = USER_PROMPT.format(problem=pair.problem, arch=pair.arch, status=pair.wrong_status.value,
                              wrong_kernel=pair.wrong_kernel.rstrip(), fixed_kernel=pair.fixed_kernel.rstrip(),
                              feedback=pair.wrong_feedback.strip() or "(none recorded)")
    return [{"role": "system", "content": SYSTEM_PROMPT.format(task_context=context)},
            {"role": "user", "content": user}]


def _json_object(text: str) -> dict[str, Any]:
    stripped = text.strip()
    candidates = [stripped] if stripped.startswith(("{", "[")) else []
    candidates += [m.group(1) for m in _FENCED.finditer(text)]
    if "{" in text and "}" in text:
        candidates.append(text[text.index("{"): text.rindex("}") + 1])
    error = "no JSON object in the answer"
    for c in candidates:
        try:
            value = json.loads(c)
        except json.JSONDecodeError as exc:
            error = f"invalid JSON: {exc.msg} at line {exc.lineno}"
            continue
        if isinstance(value, dict):
            return value
        error = "the answer is JSON but not an object"
    raise ValueError(error)


def parse_notes(text: str) -> DistilledNotes:
    """The teacher's answer as DistilledNotes; unknown keys are ignored, anything else raises ValueError."""
    data = _json_object(text)
    notes = data.get("instruction_notes")
    if isinstance(notes, list):
        data["instruction_notes"] = [{k: v for k, v in n.items() if k in _NOTE_FIELDS} if isinstance(n, dict) else n
                                     for n in notes]
    try:
        return DistilledNotes.model_validate({k: v for k, v in data.items() if k in _TOP_FIELDS})
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "(top level)"
        raise ValueError(f"{where}: {first['msg']}") from None


def note_record(pair: RepairPair, notes: DistilledNotes, teacher_model: str, prompt_sha256: str) -> NoteRecord:
    return NoteRecord(
        pair_id=pair.pair_id, problem=pair.problem, arch=pair.arch, prompt_variant=pair.prompt_variant,
        wrong_kernel=pair.wrong_kernel, fixed_kernel=pair.fixed_kernel, fixed_speedup=pair.fixed_speedup,
        summary=notes.summary, instruction_notes=notes.instruction_notes, tags=notes.tags,
        teacher_model=teacher_model, prompt_sha256=prompt_sha256, wrong_ref=pair.wrong_ref, fixed_ref=pair.fixed_ref,
    )


def collect_notes(pairs: Sequence[RepairPair], teacher: LLMClient, teacher_model: str = "",
                  done: Collection[str] = (), on_pair: Callable[[str], None] = lambda pair_id: None,
                  index_of: Callable[[RepairPair], int] | None = None) -> NotesCollection:
    """Distil every pair not in `done` (pair ids); one teacher call each, in input order. The call's trajectory
    index is `index_of(pair)` (default: the pair's ordinal within its problem), which a replay teacher serves by."""
    if len({p.pair_id for p in pairs}) != len(pairs):
        raise ValueError("two pairs share a pair_id")
    ordinal: dict[str, int] = defaultdict(int)
    records, failures, skipped = [], [], []
    for pair in pairs:
        index = ordinal[pair.problem] if index_of is None else index_of(pair)
        ordinal[pair.problem] += 1
        if pair.pair_id in done:
            skipped.append(pair.pair_id)
            continue
        messages = distill_messages(pair)
        context = CallContext(problem=pair.problem, arch=pair.arch, prompt_variant=DISTILL_VARIANT,
                              trajectory_index=index, turn=0)
        reply = teacher.complete(messages, context)
        try:
            notes = parse_notes(reply.text)
        except ValueError as exc:
            log.warning("pair %s: teacher answer refused: %s", pair.pair_id, exc)
            failures.append(NoteFailure(pair_id=pair.pair_id, reason=str(exc)))
        else:
            sha = text_sha256(json.dumps(messages, ensure_ascii=False))
            records.append(note_record(pair, notes, teacher_model or reply.model, sha))
        on_pair(pair.pair_id)
    log.info("notes: %d pairs distilled, %d refused, %d skipped", len(records), len(failures), len(skipped))
    return NotesCollection(records=records, failures=failures, skipped=skipped)
