"""The strict target metrics beside the paper's (issue 25): Tables 1 / 7 laid out again with the target-work rate
and the work best speedup, each cell next to the paper's target figure.

A cell reads "work a / b / c (target d / e / f)" for k = 1 / 4 / 8: the target-work turn correctness rate (turns
whose target path carried the work) beside the paper's target-instruction rate, in percent; likewise best
speedups. NOT_MEASURED ("n/m") marks a group none of whose turns has a work verdict (the authors' published data,
or evidence from before work shares were kept), so its zeros would mean nothing. The paper's own tables are built
by ptxcore.report.tables, unchanged.
"""

from __future__ import annotations

from collections.abc import Sequence

from ptxcore.metrics import TurnMetrics

from .tables import Recorded, Table, Unjudged, _layout, fmt_rate, fmt_speedup, k_label

NOT_MEASURED = "n/m"
"""Cell text for a group without a single work verdict."""
WORK_NOTE = (f'Target-work tables (beyond the paper): "work" counts only correct turns whose target path carried the '
             "problem's useful work (at least the registry's threshold share of its FLOPs, from SASS shapes x executed "
             f'counts); the paper\'s "target" figure is shown beside it. "{NOT_MEASURED}": no work share was measured for '
             "that group.")


def has_work(metrics: Sequence[TurnMetrics]) -> bool:
    """Any group with a work verdict (else the work tables and plot are left out of the report)."""
    return any(m.work_evidence_turns for m in metrics)


def _cell(by_k: dict[int, TurnMetrics], ks: Sequence[int], speed: bool) -> str:
    if not any(by_k[k].work_evidence_turns for k in ks):
        return NOT_MEASURED
    if speed:
        work = [fmt_speedup(by_k[k].work_best_speedup) for k in ks]
        target = [fmt_speedup(by_k[k].target_best_speedup) for k in ks]
    else:
        work = [fmt_rate(by_k[k].work_turn_correct_rate) for k in ks]
        target = [fmt_rate(by_k[k].target_turn_correct_rate) for k in ks]
    return f"work {' / '.join(work)} (target {' / '.join(target)})"


def work_tables(metrics: Sequence[TurnMetrics], ks: Sequence[int] = (1, 4, 8), unjudged: Unjudged = frozenset(),
                speed: bool = False, recorded: Recorded | None = None) -> list[Table]:
    """Per architecture, one row per model, one column per problem (Tables 1 / 7's layout)."""
    what = "Work best speedup" if speed else "Target-work turn correctness rate, %"
    return _layout(metrics, ks, speed, f"{what} (k = {k_label(metrics, ks)})",
                   "work_speedup" if speed else "work_rate", unjudged, recorded or {},
                   render=lambda c: _cell(c, ks, speed))
