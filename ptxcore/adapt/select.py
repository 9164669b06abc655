"""Selection: which source turns a build mines (pure; the turns come from the warehouse).

Each turn is checked against the rules in order and recorded with the first one it fails, so the
selection table explains every turn of the source campaigns. Fixit keeps failures (status in the
failure labels, a kernel, a closed fence); KernelGen keeps correct turns whose target instructions
executed and, by default (`target_credit: work`, issue 25), whose target path carried the work. A pre-balanced
build then caps each problem (balance.py).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence

from pydantic import Field

from ptxcore.schema import EvaluationStatus, FrozenModel, TargetInstruction, TurnRecord, text_sha256

from .balance import ProblemBalance, balance
from .models import SelectionOutcome, SelectionRecord, TurnRef
from .spec import BalancePoint, DirectionVariants, SelectionSpec, Template, admitted_variants, target_credited

Outcome = SelectionOutcome


class SelectionSummary(FrozenModel):
    """What a selection did, for the terminal and the build record."""

    build_id: str
    """Build."""
    turns_seen: int = Field(ge=0)
    """Source turns looked at."""
    selected: int = Field(ge=0)
    """Turns kept."""
    outcomes: dict[str, int]
    """Turns per outcome."""
    by_problem: list[ProblemBalance] = Field(default_factory=list)
    """Per-problem counts (after the cap, when there is one)."""
    refusal: str = ""
    """Why nothing was selected (one line; empty when something was): the build stops there."""


def item_id(campaign_id: str, trajectory_id: str, turn: int) -> str:
    """Stable short id of a turn: 16 hex digits of sha256(campaign, trajectory, turn)."""
    return text_sha256(f"{campaign_id}\0{trajectory_id}\0{turn}")[:16]


def verdict_sha256(record: TurnRecord) -> str | None:
    """Identity of the judge verdict: sha256 of its envelope's JSON (None when no judge ran)."""
    return text_sha256(record.judge.model_dump_json()) if record.judge is not None else None


def turn_ref(record: TurnRecord) -> TurnRef:
    return TurnRef(campaign_id=record.campaign_id, trajectory_id=record.trajectory_id, turn=record.turn,
                   model=record.model, kernel_sha256=record.kernel_sha256, verdict_sha256=verdict_sha256(record),
                   status=record.status.value, gpu=record.gpu)


def ends_with_closed_fence(text: str) -> bool:
    """The answer's last non-blank characters close a code fence."""
    return text.rstrip().endswith("```")


def _kind_rule(record: TurnRecord, spec: SelectionSpec, template: Template) -> Outcome | None:
    if template is Template.FIXIT:
        return None if record.status in spec.failure_labels else Outcome.NOT_A_FAILURE
    if record.status is not EvaluationStatus.PASSED:
        return Outcome.NOT_CORRECT
    if record.target_instruction is not TargetInstruction.EXECUTED:
        return Outcome.TARGET_NOT_EXECUTED
    if not target_credited(record, spec.target_credit):
        return Outcome.TARGET_NOT_CARRIED
    if record.speedup is None or record.speedup <= spec.min_speedup:
        return Outcome.BELOW_MIN_SPEEDUP
    return None


def first_failed_rule(record: TurnRecord, spec: SelectionSpec, template: Template,
                      variants: Sequence[str] | DirectionVariants | None) -> Outcome | None:
    """The first selection rule the turn fails, or None when it qualifies (before any cap)."""
    first, last = spec.source_turns
    if spec.source_model is not None and record.model != spec.source_model:
        return Outcome.WRONG_MODEL
    if record.problem not in spec.problem_names():
        return Outcome.OUT_OF_SCOPE
    admitted = admitted_variants(variants, record.problem)
    if admitted is not None and record.prompt_variant not in admitted:
        return Outcome.WRONG_VARIANT
    if not first <= record.turn <= last:
        return Outcome.OUTSIDE_TURN_WINDOW
    kind = _kind_rule(record, spec, template)
    if kind is not None:
        return kind
    if record.kernel_text is None:
        return Outcome.NO_KERNEL
    if spec.require_closed_fence and not ends_with_closed_fence(record.response_text):
        return Outcome.NO_CLOSED_FENCE
    return None


def stratum_of(record: TurnRecord, spec: SelectionSpec) -> tuple:
    parts = {"error_type": record.status.value, "turn": record.turn, "prompt_variant": record.prompt_variant}
    return tuple(parts[k] for k in spec.strata)


def stratum_label(parts: tuple) -> str:
    return "|".join(f"t{p}" if isinstance(p, int) else str(p) for p in parts)


def _record(build_id: str, rec: TurnRecord, spec: SelectionSpec, outcome: Outcome, rank: int | None) -> SelectionRecord:
    return SelectionRecord(
        build_id=build_id, item_id=item_id(rec.campaign_id, rec.trajectory_id, rec.turn), source=turn_ref(rec),
        arch=rec.arch, prompt_variant=rec.prompt_variant, problem=rec.problem, prompt_sha256=rec.prompt_sha256,
        stratum=stratum_label(stratum_of(rec, spec)), outcome=outcome, rank=rank)


def select_turns(build_id: str, turns: Iterable[TurnRecord], spec: SelectionSpec, template: Template,
                 variants: Sequence[str] | DirectionVariants | None) -> tuple[list[SelectionRecord], SelectionSummary]:
    """Every turn with its outcome, and the summary (with a refusal when nothing qualifies)."""
    turns = sorted(turns, key=lambda r: r.key)
    failed = {r.key: first_failed_rule(r, spec, template, variants) for r in turns}
    qualifying = [r for r in turns if failed[r.key] is None]
    ranks: dict[str, int] = {}
    by_problem: list[ProblemBalance] = []
    key = lambda r: f"{r.campaign_id}/{r.trajectory_id}/{r.turn:04d}"  # noqa: E731
    if spec.balance is BalancePoint.PRE and spec.per_problem_cap is not None and qualifying:
        ranks, by_problem = balance(
            qualifying, problem=lambda r: r.problem, stratum=lambda r: stratum_of(r, spec), key=key,
            cap=spec.per_problem_cap, seed=spec.seed, allow_underfilled=spec.allow_underfilled,
            problems=spec.problem_names(), what="qualifying turns")
    else:
        counts = Counter(r.problem for r in qualifying)
        by_problem = [ProblemBalance(problem=p, available=counts[p], kept=counts[p], underfilled=False)
                      for p in sorted(set(spec.problem_names()) | set(counts))]
    records = []
    for rec in turns:
        outcome = failed[rec.key]
        rank = None
        if outcome is None:
            capped = spec.balance is BalancePoint.PRE and key(rec) not in ranks
            outcome = Outcome.CAPPED if capped else Outcome.SELECTED
            rank = ranks.get(key(rec))
        records.append(_record(build_id, rec, spec, outcome, rank))
    summary = SelectionSummary(build_id=build_id, turns_seen=len(records),
                               selected=sum(r.outcome is Outcome.SELECTED for r in records),
                               outcomes=dict(Counter(r.outcome.value for r in records)), by_problem=by_problem)
    if summary.selected == 0:
        summary = summary.model_copy(update={"refusal": f"selection is empty: 0 of {len(records)} source turns "
                                             f"qualify ({', '.join(f'{k}: {v}' for k, v in sorted(summary.outcomes.items()))})"})
    return records, summary
