"""Fast_p and Fast_p^Inst curves over all N turns, per prompt variant and banded across variants.

See `ptxcore.metrics.turns` for the definitions. A curve point for group g, variant v and threshold p:

    fast_p      = #(turns t < N, PASSED, speedup > p) / (n_trajectories * N)
    fast_p_inst = #(turns t < N, PASSED, target executed, speedup > p) / (n_trajectories * N)
    fast_p_work = #(turns t < N, PASSED, target carried the work, speedup > p) / (n_trajectories * N)   (issue 25)

with N the largest turn budget among the trajectories of (g, v). Bands: mean, min and max of a point
across the prompt variants of the group at the same p.
"""

from __future__ import annotations

from bisect import bisect_right
from collections import defaultdict
from collections.abc import Iterable, Sequence

from ptxcore.schema import FrozenModel

from .turns import FAST_P_GRID, TurnOutcome


class FastPPoint(FrozenModel):
    """One point of the Fast_p curves of one (run, model, arch, definition, prompt variant)."""

    run: str
    """Run (campaign) id."""
    model: str
    """Model name."""
    arch: str
    """Architecture key."""
    definition: str
    """Problem name."""
    prompt_variant: str
    """Prompt variant."""
    p: float
    """Speedup threshold (strictly greater counts)."""
    n_trajectories: int
    """Trajectories of this variant."""
    n_turns: int
    """Turn budget N."""
    fast_p: float
    """Fraction of the n_trajectories * N turn slots that are correct with speedup > p, 0..1."""
    fast_p_inst: float
    """Same, counting only turns whose target instructions executed, 0..1."""
    fast_p_work: float
    """Same, counting only turns whose target path carried the work (Fast_p^Work), 0..1."""


class FastPBand(FrozenModel):
    """Fast_p at one p summarised across the prompt variants of a group (Figure 2's line and shading)."""

    run: str
    """Run (campaign) id."""
    model: str
    """Model name."""
    arch: str
    """Architecture key."""
    definition: str
    """Problem name."""
    p: float
    """Speedup threshold."""
    n_variants: int
    """Prompt variants summarised."""
    fast_p_mean: float
    """Mean of fast_p over variants."""
    fast_p_min: float
    """Minimum over variants."""
    fast_p_max: float
    """Maximum over variants."""
    fast_p_inst_mean: float
    """Mean of fast_p_inst over variants."""
    fast_p_inst_min: float
    """Minimum over variants."""
    fast_p_inst_max: float
    """Maximum over variants."""
    fast_p_work_mean: float
    """Mean of fast_p_work over variants."""
    fast_p_work_min: float
    """Minimum over variants."""
    fast_p_work_max: float
    """Maximum over variants."""


def _count_above(sorted_values: list[float], p: float) -> int:
    return len(sorted_values) - bisect_right(sorted_values, p)


def fast_p_curves(outcomes: Iterable[TurnOutcome], ps: Sequence[float] = FAST_P_GRID) -> list[FastPPoint]:
    """Fast_p and Fast_p^Inst per (run, model, arch, definition, prompt variant) at every p."""
    groups: dict[tuple, list[TurnOutcome]] = defaultdict(list)
    for o in outcomes:
        groups[(*o.group, o.prompt_variant)].append(o)
    points = []
    for key in sorted(groups):
        turns = groups[key]
        n = len({o.trajectory_id for o in turns})
        budget = max(o.max_turns for o in turns)
        played = [o for o in turns if o.turn < budget and o.correct and o.speedup is not None]
        all_speedups = sorted(o.speedup for o in played)
        inst_speedups = sorted(o.speedup for o in played if o.target_correct)
        work_speedups = sorted(o.speedup for o in played if o.work_correct)
        slots = n * budget
        run, model, arch, definition, variant = key
        for p in ps:
            points.append(FastPPoint(
                run=run, model=model, arch=arch, definition=definition, prompt_variant=variant, p=p,
                n_trajectories=n, n_turns=budget, fast_p=_count_above(all_speedups, p) / slots,
                fast_p_inst=_count_above(inst_speedups, p) / slots, fast_p_work=_count_above(work_speedups, p) / slots,
            ))
    return points


def fast_p_bands(points: Iterable[FastPPoint]) -> list[FastPBand]:
    """Mean, min and max across prompt variants for every (run, model, arch, definition, p)."""
    groups: dict[tuple, list[FastPPoint]] = defaultdict(list)
    for pt in points:
        groups[(pt.run, pt.model, pt.arch, pt.definition, pt.p)].append(pt)
    bands = []
    for key in sorted(groups):
        pts = groups[key]
        fp = [x.fast_p for x in pts]
        fi = [x.fast_p_inst for x in pts]
        fw = [x.fast_p_work for x in pts]
        run, model, arch, definition, p = key
        bands.append(FastPBand(
            run=run, model=model, arch=arch, definition=definition, p=p, n_variants=len(pts),
            fast_p_mean=sum(fp) / len(fp), fast_p_min=min(fp), fast_p_max=max(fp),
            fast_p_inst_mean=sum(fi) / len(fi), fast_p_inst_min=min(fi), fast_p_inst_max=max(fi),
            fast_p_work_mean=sum(fw) / len(fw), fast_p_work_min=min(fw), fast_p_work_max=max(fw),
        ))
    return bands
