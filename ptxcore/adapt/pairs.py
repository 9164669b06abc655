"""Pair collection: every correct repair version that earns the target credit (Fixit; by default its target path
carried the work, PairSpec.target_credit, issue 25; `executed`: the paper's indicator), or every
selected correct turn (KernelGen); then, for a post-balanced build, the per-problem cap over the pairs.

A correct version is a repair turn with status PASSED; its target-instruction verdict comes from the
judge's dynamic evidence (Nsight Compute counts), so a turn judged without a GPU (NOT_EVALUATED) never
makes a pair.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from pydantic import Field

from ptxcore.schema import EvaluationStatus, FrozenModel, TargetInstruction, TurnRecord, text_sha256

from .balance import ProblemBalance, balance
from .models import PairRecord, PairStatus, RepairRecord, SelectionRecord
from .recipe import PairSpec
from .select import turn_ref
from .spec import BalancePoint, SelectionSpec, Template, target_credited


class PairSummary(FrozenModel):
    """What pair collection found."""

    build_id: str
    """Build."""
    repairs: int = Field(ge=0)
    """Repair trajectories looked at (Fixit) or selected turns (KernelGen)."""
    repair_turn_statuses: dict[str, int] = Field(default_factory=dict)
    """Repair turns per status (NOT_EVALUATED: judged without a GPU, never a pair)."""
    repairs_fixed: int = Field(default=0, ge=0)
    """Repairs with at least one kept pair."""
    pairs: int = Field(ge=0)
    """Pairs kept."""
    statuses: dict[str, int] = Field(default_factory=dict)
    """Pair candidates per status."""
    by_problem: list[ProblemBalance] = Field(default_factory=list)
    """Per problem, after a post-balance cap."""
    refusal: str = ""
    """Why no pair was kept (one line; empty when some were): the build stops there."""


def pair_id(source: TurnRecord, correct: TurnRecord) -> str:
    return text_sha256(f"{source.campaign_id}\0{source.trajectory_id}\0{source.turn}\0"
                       f"{correct.campaign_id}\0{correct.trajectory_id}\0{correct.turn}")[:16]


def _status(turn: TurnRecord, spec: PairSpec) -> PairStatus:
    if spec.require_target_executed and turn.target_instruction is not TargetInstruction.EXECUTED:
        return PairStatus.TARGET_NOT_EXECUTED
    if spec.require_target_executed and not target_credited(turn, spec.target_credit):
        return PairStatus.TARGET_NOT_CARRIED
    if turn.speedup is None or turn.speedup < spec.min_speedup:
        return PairStatus.BELOW_MIN_SPEEDUP
    return PairStatus.KEPT


def _choose(turns: list[TurnRecord], statuses: dict[int, PairStatus], mode: str) -> dict[int, PairStatus]:
    eligible = [t for t in turns if statuses[t.turn] is PairStatus.KEPT]
    if mode == "all" or not eligible:
        return statuses
    chosen = eligible[-1] if mode == "latest" else max(eligible, key=lambda t: (t.speedup or 0.0, -t.turn))
    return {n: (PairStatus.NOT_CHOSEN if s is PairStatus.KEPT and n != chosen.turn else s) for n, s in statuses.items()}


def _pair(build_id: str, template: Template, item: SelectionRecord, source: TurnRecord, correct: TurnRecord,
          status: PairStatus) -> PairRecord:
    return PairRecord(
        build_id=build_id, pair_id=pair_id(source, correct), template=template, item_id=item.item_id,
        problem=item.problem, arch=item.arch, prompt_variant=item.prompt_variant, error_type=source.status.value,
        source=turn_ref(source), correct=turn_ref(correct), speedup=correct.speedup,
        target_instruction=correct.target_instruction.value, status=status)


def fixit_pairs(build_id: str, repairs: Sequence[RepairRecord], items: dict[str, SelectionRecord],
                sources: dict[str, TurnRecord], repair_turns: dict[str, list[TurnRecord]],
                spec: PairSpec) -> tuple[list[PairRecord], Counter]:
    """Pair candidates of every repair trajectory, and the repair turns' status counts."""
    out, turn_statuses = [], Counter()
    for repair in sorted(repairs, key=lambda r: r.item_id):
        turns = sorted(repair_turns.get(repair.repair_trajectory_id, []), key=lambda t: t.turn)
        turn_statuses.update(t.status.value for t in turns)
        correct = [t for t in turns if t.status is EvaluationStatus.PASSED]
        statuses = _choose(correct, {t.turn: _status(t, spec) for t in correct}, spec.correct_versions)
        item, source = items[repair.item_id], sources[repair.item_id]
        out += [_pair(build_id, Template.FIXIT, item, source, t, statuses[t.turn]) for t in correct]
    return out, turn_statuses


def kernelgen_pairs(build_id: str, items: Sequence[SelectionRecord], sources: dict[str, TurnRecord]) -> list[PairRecord]:
    """KernelGen: each selected correct turn is its own pair (source = correct)."""
    return [_pair(build_id, Template.KERNELGEN, i, sources[i.item_id], sources[i.item_id], PairStatus.KEPT)
            for i in sorted(items, key=lambda i: i.item_id)]


def post_balance(pairs: list[PairRecord], spec: SelectionSpec) -> tuple[list[PairRecord], list[ProblemBalance]]:
    """Cap kept pairs per problem over strata of the wrong turn (error type, turn, variant)."""
    kept = [p for p in pairs if p.status is PairStatus.KEPT]
    if spec.balance is not BalancePoint.POST or spec.per_problem_cap is None or not kept:
        counts = Counter(p.problem for p in kept)
        return pairs, [ProblemBalance(problem=k, available=v, kept=v, underfilled=False) for k, v in sorted(counts.items())]
    parts = {"error_type": lambda p: p.error_type, "turn": lambda p: p.source.turn,
             "prompt_variant": lambda p: p.prompt_variant}
    ranks, summary = balance(
        kept, problem=lambda p: p.problem, stratum=lambda p: tuple(parts[k](p) for k in spec.strata),
        key=lambda p: p.pair_id, cap=spec.per_problem_cap, seed=spec.seed, allow_underfilled=spec.allow_underfilled,
        problems=spec.problem_names(), what="pairs")
    capped = [p.model_copy(update={"status": PairStatus.CAPPED})
              if p.status is PairStatus.KEPT and p.pair_id not in ranks else p for p in pairs]
    return capped, summary


def summarize(build_id: str, repairs: int, pairs: list[PairRecord], turn_statuses: Counter,
              by_problem: list[ProblemBalance]) -> PairSummary:
    kept = [p for p in pairs if p.status is PairStatus.KEPT]
    return PairSummary(build_id=build_id, repairs=repairs, repair_turn_statuses=dict(turn_statuses),
                       repairs_fixed=len({p.item_id for p in kept}), pairs=len(kept),
                       statuses=dict(Counter(p.status.value for p in pairs)), by_problem=by_problem)
