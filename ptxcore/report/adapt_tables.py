"""Adapt tables: Table 4 (turn metrics by repair-retrieval condition) and Tables 8 / 9 (SFT models vs base).

Table 4: one row per (base model, condition), the Table 1 cell ("target a / b / c (all d / e / f)", k =
1 / 4 / 8) per problem and the mean over problems; a second table gives best speedups. A run's condition
is what its turns recorded (`turn_augmentations`); runs imported from the authors' data carry it in the
model label ("Qwen3.6-27B + retrieved repair notes [and fixed kernel]"); anything else is `none`. The
notes+fixed condition shows a verified solution of the same problem and is marked ORACLE.

Tables 8 / 9: the Table 1 / Table 7 layout (`tables.correctness_tables` / `speedup_tables`) over the
SFT checkpoints and their base model, after the trajectory subset (`subsets.TrajectorySubset`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ptxcore.metrics import TURN_LIMITS, TurnMetrics, TurnOutcome, turn_metrics
from ptxcore.schema import RetrievalCondition

from .tables import (
    NOT_EVALUATED,
    ReportError,
    Table,
    Unjudged,
    correctness_tables,
    fmt_rate,
    fmt_speedup,
    speedup_tables,
    triple_cell,
    unjudged_groups,
)

IMPORTED_CONDITIONS: dict[str, tuple[str, RetrievalCondition]] = {
    "Qwen3.6-27B + retrieved repair notes": ("Qwen3.6-27B", RetrievalCondition.NOTES),
    "Qwen3.6-27B + retrieved repair notes and fixed kernel": ("Qwen3.6-27B", RetrievalCondition.NOTES_FIXED),
}
"""Model labels of the authors' published retrieval runs -> (base model, condition)."""
_SEP = " · "


def condition_of(model: str, recorded: RetrievalCondition | None) -> tuple[str, RetrievalCondition]:
    """(base model, condition) of a run: the recorded condition wins, then the imported label, else none."""
    if recorded is not None:
        return model, recorded
    return IMPORTED_CONDITIONS.get(model, (model, RetrievalCondition.NONE))


def by_condition(outcomes: Sequence[TurnOutcome], recorded: Mapping[str, RetrievalCondition]) -> list[TurnOutcome]:
    """Outcomes relabelled `<base model> · <condition>` (the rows of Table 4)."""
    out = []
    for o in outcomes:
        base, cond = condition_of(o.model, recorded.get(o.run))
        out.append(o.model_copy(update={"model": f"{base}{_SEP}{cond.label}"}))
    return out


def _cells(metrics: Sequence[TurnMetrics]) -> dict[tuple[str, str, str], dict[int, TurnMetrics]]:
    """(row label, arch, definition) -> {k: metrics}; two runs under one condition for one problem are refused."""
    cells: dict[tuple[str, str, str], dict[int, TurnMetrics]] = {}
    runs: dict[tuple[str, str, str], str] = {}
    for m in metrics:
        key = (m.model, m.arch, m.definition)
        if runs.setdefault(key, m.run) != m.run:
            raise ReportError(f"two runs for {m.model} / {m.arch} / {m.definition}: {runs[key]} and {m.run}; "
                              "select one of them")
        cells.setdefault(key, {})[m.k] = m
    return cells


def _condition_cells(metrics: Sequence[TurnMetrics], unjudged: Unjudged, speed: bool) -> list[list[str]]:
    cells = _cells(metrics)
    defs = sorted({d for (_, _, d) in cells})
    rows = []
    for model, arch in sorted({(m, a) for (m, a, _) in cells}):
        base, _, cond = model.partition(_SEP)
        row, present = [base, cond, arch], []
        for d in defs:
            key = (model, arch, d)
            if key not in cells:
                row.append("")
            elif key in unjudged:
                row.append(NOT_EVALUATED)
            else:
                present.append(cells[key])
                row.append(_triple(cells[key], speed))
        row.append(_mean(present, speed) if present else NOT_EVALUATED)
        rows.append(row)
    return [["model", "condition", "arch", *defs, "mean" if not speed else "best over problems"], *rows]


def _triple(by_k: Mapping[int, TurnMetrics], speed: bool) -> str:
    if speed:
        return triple_cell([fmt_speedup(by_k[k].target_best_speedup) for k in TURN_LIMITS],
                           [fmt_speedup(by_k[k].best_speedup) for k in TURN_LIMITS])
    return triple_cell([fmt_rate(by_k[k].target_turn_correct_rate) for k in TURN_LIMITS],
                       [fmt_rate(by_k[k].turn_correct_rate) for k in TURN_LIMITS])


def _mean(cells: Sequence[Mapping[int, TurnMetrics]], speed: bool) -> str:
    if speed:
        def best(attr: str, k: int) -> float | None:
            values = [getattr(c[k], attr) for c in cells if getattr(c[k], attr) is not None]
            return max(values) if values else None
        return triple_cell([fmt_speedup(best("target_best_speedup", k)) for k in TURN_LIMITS],
                           [fmt_speedup(best("best_speedup", k)) for k in TURN_LIMITS])
    n = len(cells)
    return triple_cell([fmt_rate(sum(c[k].target_turn_correct_rate for c in cells) / n) for k in TURN_LIMITS],
                       [fmt_rate(sum(c[k].turn_correct_rate for c in cells) / n) for k in TURN_LIMITS])


def retrieval_tables(outcomes: Sequence[TurnOutcome], recorded: Mapping[str, RetrievalCondition]) -> list[Table]:
    """Table 4 (rates) and its best-speedup companion."""
    if not outcomes:
        raise ReportError("no turns to report")
    relabelled = by_condition(outcomes, recorded)
    metrics, unjudged = turn_metrics(relabelled), unjudged_groups(relabelled)
    ks = " / ".join(map(str, TURN_LIMITS))
    rates = _condition_cells(metrics, unjudged, speed=False)
    speeds = _condition_cells(metrics, unjudged, speed=True)
    return [Table(title=f"Table 4: turn correctness rate by repair-retrieval condition, % (k = {ks})",
                  header=rates[0], rows=rates[1:], key="table4"),
            Table(title=f"Table 4 (speedups): best speedup by repair-retrieval condition (k = {ks})",
                  header=speeds[0], rows=speeds[1:], key="table4_speedup")]


def sft_tables(outcomes: Sequence[TurnOutcome]) -> list[Table]:
    """Tables 8 (turn correctness rates) and 9 (best speedups), per architecture, models as rows."""
    if not outcomes:
        raise ReportError("no turns to report")
    metrics, unjudged = turn_metrics(outcomes), unjudged_groups(outcomes)
    out = []
    for number, tables in ((8, correctness_tables(metrics, unjudged=unjudged)),
                           (9, speedup_tables(metrics, unjudged=unjudged))):
        for t in tables:
            arch = t.key.rsplit("_", 1)[1]
            out.append(t.model_copy(update={"title": f"Table {number}: SFT models vs base — {t.title}",
                                            "key": f"table{number}_{arch}"}))
    return out
