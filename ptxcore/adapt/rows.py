"""SFT rows: Fixit (five messages) and KernelGen (three messages), with provenance metadata.

Fixit:     system / first user of the failing trajectory / its wrong answer / the feedback it got /
           `<think>reasoning</think>` + the repaired kernel in a ```cpp block      (loss on the last only)
KernelGen: system / first user / `<think>reasoning</think>` + the strong model's whole correct answer
Every row's messages are what the trainer's chat template renders and parses back (chat.round_trip, as the
authors' builders write them), and the feedback is the model-facing text (ptxcore.agent.feedback.clean_log: no
traceback of ours, no host path). The metadata is flat (one Parquet struct with a fixed schema) and holds the
sha256 of every part. `prompt_completion` is the same row in TRL's conversational prompt-completion form.
"""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import Field

from ptxcore.agent.feedback import clean_log
from ptxcore.schema import FrozenModel, TurnRecord, text_sha256

from .chat import ChatRenderer, round_trip
from .models import PairRecord, ReasoningRecord, SftMessage, SftRow
from .repair import SourcePrompt
from .spec import Template

TARGET_FORMAT = {
    Template.FIXIT: "fixit: system, task, wrong answer, feedback -> <think>reasoning</think> + fixed kernel",
    Template.KERNELGEN: "kernelgen: system, task -> <think>reasoning</think> + correct answer",
}

METADATA_FIELDS: dict[str, type] = {
    "build_id": str, "recipe": str, "recipe_sha256": str, "template": str, "target_format": str,
    "source_label": str, "pair_id": str, "problem": str, "arch": str, "prompt_variant": str, "error_type": str,
    "source_campaign_id": str, "source_trajectory_id": str, "source_turn": int, "source_model": str,
    "source_status": str, "source_kernel_sha256": str, "source_verdict_sha256": str, "source_prompt_sha256": str,
    "source_gpu": str, "correct_campaign_id": str, "correct_trajectory_id": str, "correct_turn": int,
    "correct_model": str, "correct_kernel_sha256": str, "correct_verdict_sha256": str, "correct_speedup": float,
    "correct_target_instruction": str, "correct_gpu": str, "correct_driver": str,
    "source_recorded_from": str, "correct_recorded_from": str,
    "reasoning_model": str, "reasoning_attempt": int, "reasoning_kind": str, "reasoning_prompt_sha256": str,
    "reasoning_response_sha256": str, "reasoning_chars": int,
    "system_sha256": str, "task_sha256": str, "wrong_answer_sha256": str, "wrong_feedback_sha256": str,
    "reasoning_sha256": str, "correct_answer_sha256": str, "final_message_sha256": str, "messages_sha256": str,
    "total_tokens": int, "tokenizer": str, "chat_template": str, "chat_template_char_delta": int,
}
"""Every metadata key and its type (the Parquet schema of the `metadata` struct); absent values are null."""


class RowInputs(FrozenModel):
    """Everything one row is built from."""

    build_id: str
    """Build."""
    recipe: str
    """Recipe name."""
    recipe_sha256: str
    """Hash of the recipe file."""
    source_label: str
    """Label in ids and metadata."""
    pair: PairRecord
    """The pair."""
    source: TurnRecord
    """Wrong turn (Fixit) or correct turn (KernelGen)."""
    correct: TurnRecord
    """Correct turn (the repair turn for Fixit)."""
    prompt: SourcePrompt
    """The source trajectory's system and first user message."""
    reasoning: ReasoningRecord
    """The accepted monologue."""
    extra: dict[str, str | int | float | None] = Field(default_factory=dict)
    """Metadata added after counting (total_tokens, tokenizer)."""


def final_fixit(reasoning: str, kernel: str) -> str:
    return f"<think>\n{reasoning.strip()}\n</think>\n\n```cpp\n{kernel.strip()}\n```"


def final_kernelgen(reasoning: str, answer: str) -> str:
    return f"<think>\n{reasoning.strip()}\n</think>\n{answer.strip()}"


def row_id(source_label: str, pair: PairRecord) -> str:
    return f"{source_label}-{pair.problem}-{pair.pair_id}"


def _parts(inp: RowInputs, reasoning: str) -> list[tuple[str, str]]:
    p = inp.prompt
    if inp.pair.template is Template.FIXIT:
        final = final_fixit(reasoning, inp.correct.kernel_text or "")
        return [("system", p.system), ("user", p.user), ("assistant", inp.source.response_text),
                ("user", clean_log(inp.source.feedback)), ("assistant", final)]
    return [("system", p.system), ("user", p.user), ("assistant", final_kernelgen(reasoning, inp.correct.response_text))]


def _messages(inp: RowInputs, reasoning: str, renderer: ChatRenderer | None) -> list[SftMessage]:
    parts = _parts(inp, reasoning)
    contents = [c for _, c in parts]
    if renderer is not None:
        contents = round_trip(renderer, [{"role": r, "content": c} for r, c in parts])
    return [SftMessage(role=r, content=c, step_loss_mask=int(i == len(parts) - 1))
            for i, ((r, _), c) in enumerate(zip(parts, contents, strict=True))]


def message_dicts(inp: RowInputs, reasoning: str | None = None,
                  renderer: ChatRenderer | None = None) -> list[dict[str, str]]:
    """The row's messages as role/content dicts (for counting), optionally with another monologue."""
    text = inp.reasoning.reasoning if reasoning is None else reasoning
    return [{"role": m.role, "content": m.content} for m in _messages(inp, text, renderer)]


REPO_ROOT = Path(__file__).resolve().parents[2]


def portable_source(source: str | None) -> str | None:
    """A recorded-verdict folder as rows may carry it: repository-relative (or working-directory-relative) when it
    lies inside, else `recorded-set:<folder name>`; never a build machine's absolute path."""
    if not source:
        return None
    path = Path(source)
    if not path.is_absolute():
        return path.as_posix()
    for root in (REPO_ROOT, Path.cwd().resolve()):
        if path.is_relative_to(root):
            return path.relative_to(root).as_posix()
    return f"recorded-set:{path.name}"


def _recorded_from(turn: TurnRecord) -> str | None:
    """The recorded-verdict folder a turn's verdict was reused from (route recorded:); None when judged live."""
    rec = turn.judge.recorded if turn.judge is not None else None
    return portable_source(rec.source) if rec is not None else None


def _metadata(inp: RowInputs, messages: list[SftMessage]) -> dict:
    pair, src, cor, rs = inp.pair, inp.pair.source, inp.pair.correct, inp.reasoning
    fixit = pair.template is Template.FIXIT
    meta = {
        "build_id": inp.build_id, "recipe": inp.recipe, "recipe_sha256": inp.recipe_sha256,
        "template": pair.template.value, "target_format": TARGET_FORMAT[pair.template],
        "source_label": inp.source_label, "pair_id": pair.pair_id, "problem": pair.problem, "arch": pair.arch,
        "prompt_variant": pair.prompt_variant, "error_type": pair.error_type,
        **{f"source_{k}": getattr(src, k) for k in ("campaign_id", "trajectory_id", "turn", "model", "status",
                                                     "kernel_sha256", "verdict_sha256", "gpu")},
        "source_prompt_sha256": inp.source.prompt_sha256,
        **{f"correct_{k}": getattr(cor, k) for k in ("campaign_id", "trajectory_id", "turn", "model",
                                                      "kernel_sha256", "verdict_sha256", "gpu")},
        "correct_speedup": pair.speedup, "correct_target_instruction": pair.target_instruction,
        "correct_driver": inp.correct.environment.driver_version,
        "source_recorded_from": _recorded_from(inp.source), "correct_recorded_from": _recorded_from(inp.correct),
        "reasoning_model": rs.model, "reasoning_attempt": rs.attempt, "reasoning_kind": rs.kind.value,
        "reasoning_prompt_sha256": rs.prompt_sha256, "reasoning_response_sha256": text_sha256(rs.response_text),
        "reasoning_chars": len(rs.reasoning), "system_sha256": text_sha256(messages[0].content),
        "task_sha256": text_sha256(messages[1].content),
        "wrong_answer_sha256": text_sha256(messages[2].content) if fixit else None,
        "wrong_feedback_sha256": text_sha256(messages[3].content) if fixit else None,
        "reasoning_sha256": text_sha256(rs.reasoning),
        "correct_answer_sha256": text_sha256(inp.correct.kernel_text or "" if fixit else inp.correct.response_text),
        "final_message_sha256": text_sha256(messages[-1].content),
        "messages_sha256": text_sha256(json.dumps([m.model_dump() for m in messages], ensure_ascii=False)),
        **inp.extra,
    }
    return {k: meta.get(k) for k in METADATA_FIELDS}


def build_row(inp: RowInputs, renderer: ChatRenderer | None = None) -> SftRow:
    """The training row (ids: `<source label>-<problem>-<pair id>`), round-tripped through `renderer`'s template."""
    messages = _messages(inp, inp.reasoning.reasoning, renderer)
    raw = sum(len(c) for _, c in _parts(inp, inp.reasoning.reasoning))
    extra = {"chat_template": renderer.label if renderer is not None else None,
             "chat_template_char_delta": sum(len(m.content) for m in messages) - raw, **inp.extra}
    return SftRow(id=row_id(inp.source_label, inp.pair), template=inp.pair.template, messages=messages,
                  metadata=_metadata(inp.model_copy(update={"extra": extra}), messages))


def prompt_completion(row: SftRow) -> dict:
    """TRL's conversational prompt-completion form: `prompt` = every message before the supervised one,
    `completion` = the supervised assistant message (SFTTrainer then computes loss on the completion only)."""
    as_dicts = [{"role": m.role, "content": m.content} for m in row.messages]
    return {"id": row.id, "prompt": as_dicts[:-1], "completion": as_dicts[-1:]}
