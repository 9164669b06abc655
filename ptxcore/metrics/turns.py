"""The paper's Section 4.1 metrics over recorded turns. Pure Python; the warehouse's SQL views
(`ptxcore.warehouse.views`) compute the same numbers and a test proves they agree on real data.

Definitions (a *group* is one (run, model, arch, definition); `k` is a turn limit; turns are 0-based):

- **n_trajectories**: distinct trajectories of the group that have at least one recorded turn.
- **turn correctness rate @k** = (correct turns with turn < k, over every trajectory of the group)
  / (n_trajectories * min(k, N)), N the group's turn budget (`turns_counted`): a k beyond the budget counts
  the whole budget (a 5-turn campaign's k = 8 is its k = 5; every published run has N = 8, so the paper's
  numbers are unchanged). A turn is correct when its status is PASSED.
- **target-instruction turn correctness rate @k**: the same, counting only correct turns whose
  target-instruction verdict is `executed` (`not_executed`, `absent` and `unknown` all count as not
  executed).
- **best speedup @k**: the largest speedup over correct turns with turn < k across all trajectories of
  the group; None when there is none. **Target best speedup @k**: the same over target-correct turns.
- **Fast_p** over all N turns: (correct turns with turn < N and speedup > p) / (n_trajectories * N),
  where N is the group's turn budget (the trajectories' `max_turns`). **Fast_p^Inst**: the same over
  target-correct turns. Fast_0 equals the turn correctness rate at k = N.
- **Beyond the paper (issue 25): target-work turn correctness rate @k** counts correct turns whose target path
  *carried the work* (`target_work` = carries: the profiled call's target instructions did at least the registry's
  threshold share of the problem's FLOPs, ptxcore.sass.work); **work best speedup @k** and **Fast_p^Work** are the
  same over those turns. `unknown` counts as not carried. `work_evidence_turns` says how many of the first k turns
  had a work verdict at all (0 for the authors' published data, which has none: the report shows n/m there).
- Every metric is also computed per prompt variant; across variants we report the mean with the
  minimum and maximum (the shading of Figure 2).

Trajectories that stopped early (a correct turn reached the target speedup, default 1.2, before turn
k) are counted as the authors' exporter counts them: only the turns that were actually played exist,
so the turns after the stop contribute nothing to the numerators while the denominator stays
n_trajectories * k (the authors' aggregation selects the recorded rows with turn < k and divides by
the number of trajectories). The same holds for trajectories cut short by a context overflow. Turns
that were not evaluated (NOT_EVALUATED, INFRA_ERROR) are turns that were played but are not correct.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence

from ptxcore.schema import EvaluationStatus, FrozenModel, TargetInstruction, TargetWork

TURN_LIMITS: tuple[int, ...] = (1, 4, 8)
"""The turn limits k of the paper's tables."""

FAST_P_GRID: tuple[float, ...] = tuple(i / 100 for i in range(0, 301))
"""Speedup thresholds p at which Fast_p curves are evaluated: 0.00, 0.01, ..., 3.00."""

GroupKey = tuple[str, str, str, str]


class TurnOutcome(FrozenModel):
    """What the metrics need of one recorded turn (a row of the warehouse view v_turn_outcomes)."""

    run: str
    """Run = campaign id (for imported PTXBench data: the exp_dir's last path component)."""
    model: str
    """Model name."""
    arch: str
    """Architecture key (hopper, blackwell)."""
    definition: str
    """Problem (definition) name."""
    prompt_variant: str
    """Prompt variant of the trajectory."""
    trajectory_id: str
    """Trajectory identity within the run."""
    turn: int
    """0-based turn index."""
    status: EvaluationStatus
    """Turn verdict."""
    target_instruction: TargetInstruction
    """Target-instruction verdict."""
    speedup: float | None
    """reference / candidate latency (correct turns only)."""
    reasoning_tokens: int
    """Reasoning tokens of the model call."""
    max_turns: int
    """Turn budget N of the trajectory."""
    recorded_from: str | None = None
    """Where its verdict was measured ("GPU, driver, date") when it was reused from a recorded judgement; None
    when the run's own judge reached it (or no GPU judged it)."""
    target_work: TargetWork = TargetWork.UNKNOWN
    """Did the target path carry the problem's work (unknown where no work share was measured)."""

    @property
    def correct(self) -> bool:
        return self.status is EvaluationStatus.PASSED

    @property
    def target_correct(self) -> bool:
        return self.correct and self.target_instruction is TargetInstruction.EXECUTED

    @property
    def work_correct(self) -> bool:
        """Correct, and the target path carried the work (the strict counterpart of target_correct)."""
        return self.correct and self.target_work is TargetWork.CARRIES

    @property
    def group(self) -> GroupKey:
        return (self.run, self.model, self.arch, self.definition)


class TurnMetrics(FrozenModel):
    """Turn-level metrics of one group (optionally one prompt variant) at turn limit k."""

    run: str
    """Run (campaign) id."""
    model: str
    """Model name."""
    arch: str
    """Architecture key."""
    definition: str
    """Problem name."""
    k: int
    """Turn limit."""
    n_trajectories: int
    """Trajectories in the group."""
    turn_correct_rate: float
    """Correct turns among the first k of every trajectory / (n_trajectories * turns_counted), 0..1."""
    target_turn_correct_rate: float
    """Same, counting only turns whose target instructions executed, 0..1."""
    best_speedup: float | None
    """Best speedup over correct turns with turn < k (None when none)."""
    target_best_speedup: float | None
    """Best speedup over target-correct turns with turn < k (None when none)."""
    work_turn_correct_rate: float
    """Correct turns whose target path carried the work, among the first k of every trajectory / (n_trajectories *
    turns_counted), 0..1."""
    work_best_speedup: float | None
    """Best speedup over those turns (None when none)."""
    work_evidence_turns: int
    """Turns with turn < k that have a work verdict (carries or does_not_carry): 0 means not measured."""
    prompt_variant: str | None = None
    """The prompt variant, or None for all variants pooled."""
    turns_counted: int = 0
    """min(k, the group's turn budget): turns per trajectory in the denominators."""
    recorded_turns: int = 0
    """Turns with turn < k whose verdict was reused from a recorded judgement (not measured in the run)."""
    recorded_from: str | None = None
    """Where those verdicts were measured, distinct, "; "-separated; None when there are none."""

    def to_json(self) -> dict[str, object]:
        """The object of `ptxbench report turn-metrics --json` (exactly these keys)."""
        return {
            "run": self.run, "model": self.model, "arch": self.arch, "definition": self.definition,
            "k": self.k, "n_trajectories": self.n_trajectories, "turn_correct_rate": self.turn_correct_rate,
            "target_turn_correct_rate": self.target_turn_correct_rate, "best_speedup": self.best_speedup,
            "target_best_speedup": self.target_best_speedup, "turns_counted": self.turns_counted,
            "recorded_turns": self.recorded_turns, "recorded_from": self.recorded_from,
        }


def _max_or_none(values: Iterable[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return max(present) if present else None


def _group(outcomes: Iterable[TurnOutcome], by_variant: bool) -> dict[tuple, list[TurnOutcome]]:
    groups: dict[tuple, list[TurnOutcome]] = defaultdict(list)
    for o in outcomes:
        groups[(*o.group, o.prompt_variant if by_variant else None)].append(o)
    return groups


def metrics_at(key: tuple, turns: Sequence[TurnOutcome], k: int) -> TurnMetrics:
    """Metrics of one group's turns at turn limit k."""
    n = len({o.trajectory_id for o in turns})
    counted = min(k, max(o.max_turns for o in turns))
    within = [o for o in turns if o.turn < k]
    correct = [o for o in within if o.correct]
    target = [o for o in correct if o.target_correct]
    recorded = sorted({o.recorded_from for o in within if o.recorded_from is not None})
    work = [o for o in correct if o.work_correct]
    run, model, arch, definition, variant = key
    return TurnMetrics(
        run=run, model=model, arch=arch, definition=definition, k=k, n_trajectories=n,
        turn_correct_rate=len(correct) / (n * counted), target_turn_correct_rate=len(target) / (n * counted),
        best_speedup=_max_or_none(o.speedup for o in correct),
        target_best_speedup=_max_or_none(o.speedup for o in target),
        work_turn_correct_rate=len(work) / (n * counted), work_best_speedup=_max_or_none(o.speedup for o in work),
        work_evidence_turns=sum(o.target_work is not TargetWork.UNKNOWN for o in within), prompt_variant=variant,
        turns_counted=counted, recorded_turns=sum(o.recorded_from is not None for o in within),
        recorded_from="; ".join(recorded) or None,
    )


def turn_metrics(
    outcomes: Iterable[TurnOutcome], ks: Sequence[int] = TURN_LIMITS, by_variant: bool = False
) -> list[TurnMetrics]:
    """Metrics per (run, model, arch, definition[, prompt variant]) and k, sorted by those keys."""
    if any(k < 1 for k in ks):
        raise ValueError(f"turn limits must be >= 1, got {list(ks)}")
    groups = _group(outcomes, by_variant)
    return [metrics_at(key, groups[key], k) for key in sorted(groups, key=_sort_key) for k in sorted(ks)]


def _sort_key(key: tuple) -> tuple:
    return tuple("" if v is None else v for v in key)


class VariantSpread(FrozenModel):
    """A group's turn-level rates at k summarised across its prompt variants (mean, min, max)."""

    run: str
    """Run (campaign) id."""
    model: str
    """Model name."""
    arch: str
    """Architecture key."""
    definition: str
    """Problem name."""
    k: int
    """Turn limit."""
    n_variants: int
    """Prompt variants summarised."""
    turn_correct_rate_mean: float
    """Mean over variants of the turn correctness rate."""
    turn_correct_rate_min: float
    """Minimum over variants."""
    turn_correct_rate_max: float
    """Maximum over variants."""
    target_turn_correct_rate_mean: float
    """Mean over variants of the target-instruction turn correctness rate."""
    target_turn_correct_rate_min: float
    """Minimum over variants."""
    target_turn_correct_rate_max: float
    """Maximum over variants."""
    work_turn_correct_rate_mean: float
    """Mean over variants of the target-work turn correctness rate."""
    work_turn_correct_rate_min: float
    """Minimum over variants."""
    work_turn_correct_rate_max: float
    """Maximum over variants."""


def variant_spread(by_variant: Iterable[TurnMetrics]) -> list[VariantSpread]:
    """Mean and min–max across prompt variants of per-variant metrics (from turn_metrics(by_variant=True))."""
    groups: dict[tuple, list[TurnMetrics]] = defaultdict(list)
    for m in by_variant:
        if m.prompt_variant is None:
            raise ValueError("variant_spread needs per-variant metrics (turn_metrics(by_variant=True))")
        groups[(m.run, m.model, m.arch, m.definition, m.k)].append(m)
    out = []
    for key in sorted(groups):
        ms = groups[key]
        rate = [m.turn_correct_rate for m in ms]
        target = [m.target_turn_correct_rate for m in ms]
        work = [m.work_turn_correct_rate for m in ms]
        run, model, arch, definition, k = key
        out.append(VariantSpread(
            run=run, model=model, arch=arch, definition=definition, k=k, n_variants=len(ms),
            turn_correct_rate_mean=sum(rate) / len(rate), turn_correct_rate_min=min(rate),
            turn_correct_rate_max=max(rate), target_turn_correct_rate_mean=sum(target) / len(target),
            target_turn_correct_rate_min=min(target), target_turn_correct_rate_max=max(target),
            work_turn_correct_rate_mean=sum(work) / len(work), work_turn_correct_rate_min=min(work),
            work_turn_correct_rate_max=max(work),
        ))
    return out
