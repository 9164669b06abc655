"""Value types of repair retrieval: the input pairs, the distilled notes and the stored note records.

`RepairPair` is the minimal input this package needs from the pair-collection stage (ptxcore.adapt's pairs,
the adapt warehouse tables): whoever builds pairs converts them to this type, so retrieval depends on no
internals of the data engine. `NoteRecord` is one line of a notes JSONL file (and one row of the
warehouse table `repair_notes`): self-contained, with both kernels' text, so the index reads no other file.
"""

from __future__ import annotations

import json
from enum import StrEnum
from typing import Annotated

from pydantic import BeforeValidator, Field, StringConstraints

from ptxcore.schema import EvaluationStatus, FrozenModel, TargetInstruction, TurnRecord, text_sha256

NOTE_FIELD_CHARS = 4000
"""Longest accepted text of one note field (teacher output is untrusted and goes into a prompt)."""
NOTE_LIST_ITEMS = 16
"""Most entries of one list field of a note."""
MAX_NOTES_PER_PAIR = 8
"""The teacher is asked for 3 to 8 notes per pair; more are refused."""
KERNEL_CHARS = 400_000
"""Longest accepted kernel text in a pair or a note record."""


def _as_list(v: object) -> object:
    """A single string where a list is expected becomes a one-item list (teachers do this)."""
    if isinstance(v, str):
        return [v] if v.strip() else []
    return v


NoteText = Annotated[str, StringConstraints(max_length=NOTE_FIELD_CHARS, strip_whitespace=True)]
NoteList = Annotated[list[NoteText], BeforeValidator(_as_list), Field(max_length=NOTE_LIST_ITEMS)]
KernelText = Annotated[str, StringConstraints(min_length=1, max_length=KERNEL_CHARS)]


class Completeness(StrEnum):
    """Whether a note's correct example is complete."""

    COMPLETE = "complete"
    """Every operand that decides legality is present."""
    PARTIAL = "partial"
    """Details are missing (listed in missing_details)."""


class InstructionNote(FrozenModel):
    """One instruction-usage note distilled from a (wrong, fixed) pair."""

    instruction: Annotated[str, StringConstraints(min_length=1, max_length=NOTE_FIELD_CHARS, strip_whitespace=True)]
    """The CUDA / PTX / API primitive or instruction family the note is about."""
    shape_context: NoteText = ""
    """dtype / rank / tile / layout / alignment context in which the example is legal."""
    correct_example: NoteText = ""
    """A minimal valid use of the primitive."""
    wrong_example: NoteText = ""
    """A minimal invalid use, as in the wrong kernel."""
    operand_contract: NoteList = Field(default_factory=list)
    """Operand order, address spaces, immediates, descriptor fields that must hold."""
    required_sequence: NoteList = Field(default_factory=list)
    """Instructions or calls that must appear together, in order."""
    diagnostics: NoteList = Field(default_factory=list)
    """Compiler / runtime / profiler messages the note explains."""
    do_not_do: NoteList = Field(default_factory=list)
    """Invalid shortcuts to avoid."""
    example_completeness: Completeness = Completeness.COMPLETE
    """Whether correct_example is complete."""
    missing_details: NoteList = Field(default_factory=list)
    """What the example omits (empty when complete)."""

    @property
    def key(self) -> str:
        """Identity for de-duplication across pairs (what the model would read, minus the wrong example)."""
        parts = [self.instruction, self.shape_context, self.correct_example, self.operand_contract,
                 self.required_sequence, self.diagnostics, self.do_not_do]
        return text_sha256(json.dumps(parts, ensure_ascii=False))


class DistilledNotes(FrozenModel):
    """What the teacher returns for one pair (the JSON object the distillation prompt asks for)."""

    summary: NoteText = ""
    """One sentence describing the repair."""
    instruction_notes: list[InstructionNote] = Field(min_length=1, max_length=MAX_NOTES_PER_PAIR)
    """The notes (the prompt asks for 3 to 8)."""
    tags: Annotated[list[Annotated[str, StringConstraints(max_length=64)]], BeforeValidator(_as_list),
                    Field(max_length=NOTE_LIST_ITEMS)] = Field(default_factory=list)
    """Short topic tags."""


class TurnRef(FrozenModel):
    """Where a kernel came from in the warehouse."""

    campaign_id: str
    """Campaign (run) id."""
    trajectory_id: str
    """Trajectory id."""
    turn: int = Field(ge=0)
    """0-based turn."""


class RepairPair(FrozenModel):
    """A wrong kernel and a verified fix of it: the input of notes distillation."""

    pair_id: str = Field(min_length=1, max_length=256)
    """Stable identity of the pair (e.g. from the adapt pairs table)."""
    problem: str = Field(min_length=1)
    """Definition name."""
    arch: str = Field(min_length=1)
    """Architecture key."""
    prompt_variant: str = ""
    """Prompt variant of the failing trajectory."""
    task_prompt: str = ""
    """The failing trajectory's system prompt and first user message (task context for the teacher)."""
    wrong_kernel: KernelText
    """The failing kernel."""
    wrong_status: EvaluationStatus
    """Its verdict."""
    wrong_feedback: str = ""
    """The feedback it got (compiler / runtime / numerical errors)."""
    fixed_kernel: KernelText
    """The repaired kernel (correct)."""
    fixed_speedup: float | None = Field(default=None, gt=0)
    """Speedup of the fixed kernel (None when not measured)."""
    fixed_target_instruction: TargetInstruction = TargetInstruction.UNKNOWN
    """Whether the fixed kernel's target instructions executed."""
    wrong_ref: TurnRef | None = None
    """The failing turn in the warehouse."""
    fixed_ref: TurnRef | None = None
    """The repairing turn in the warehouse."""


class NoteRecord(FrozenModel):
    """Notes distilled from one pair, with everything retrieval needs (one JSONL line)."""

    pair_id: str = Field(min_length=1, max_length=256)
    """The pair the notes came from."""
    problem: str = Field(min_length=1)
    """Definition name of the pair."""
    arch: str = ""
    """Architecture key."""
    prompt_variant: str = ""
    """Prompt variant of the failing trajectory."""
    wrong_kernel: KernelText
    """The historical wrong kernel (the BM25 document)."""
    fixed_kernel: KernelText
    """Its verified fix (shown only in the notes+fixed ORACLE condition)."""
    fixed_speedup: float | None = Field(default=None, gt=0)
    """Speedup of the fix (ranks fixes of the same wrong kernel)."""
    summary: NoteText = ""
    """The teacher's one-sentence summary."""
    instruction_notes: list[InstructionNote] = Field(min_length=1, max_length=MAX_NOTES_PER_PAIR)
    """The distilled notes."""
    tags: list[str] = Field(default_factory=list)
    """Topic tags."""
    teacher_model: str = ""
    """Model that distilled the notes."""
    prompt_sha256: str = ""
    """Hash of the distillation prompt (system + user)."""
    wrong_ref: TurnRef | None = None
    """The failing turn in the warehouse."""
    fixed_ref: TurnRef | None = None
    """The repairing turn in the warehouse."""

    @property
    def wrong_sha256(self) -> str:
        return text_sha256(self.wrong_kernel)

    @property
    def fixed_sha256(self) -> str:
        return text_sha256(self.fixed_kernel)

    @property
    def sha256(self) -> str:
        """Content identity of the record."""
        return text_sha256(self.model_dump_json())


def repair_pair_from_turns(pair_id: str, wrong: TurnRecord, fixed: TurnRecord, task_prompt: str = "") -> RepairPair:
    """A pair from two warehouse turns (the failing turn and the correct one that repairs it)."""
    if wrong.kernel_text is None or fixed.kernel_text is None:
        raise ValueError(f"pair {pair_id}: both turns need a kernel")
    if fixed.status is not EvaluationStatus.PASSED:
        raise ValueError(f"pair {pair_id}: the fixed turn is {fixed.status.value}, not PASSED")
    return RepairPair(
        pair_id=pair_id, problem=wrong.problem, arch=wrong.arch, prompt_variant=wrong.prompt_variant,
        task_prompt=task_prompt, wrong_kernel=wrong.kernel_text, wrong_status=wrong.status,
        wrong_feedback=wrong.feedback, fixed_kernel=fixed.kernel_text, fixed_speedup=fixed.speedup,
        fixed_target_instruction=fixed.target_instruction,
        wrong_ref=TurnRef(campaign_id=wrong.campaign_id, trajectory_id=wrong.trajectory_id, turn=wrong.turn),
        fixed_ref=TurnRef(campaign_id=fixed.campaign_id, trajectory_id=fixed.trajectory_id, turn=fixed.turn),
    )
