"""The paper's table layouts, built from `ptxcore.metrics` results (no I/O here).

- Tables 1 / 8: per architecture, one row per model, one column per problem; a cell reads
  "target a / b / c (all d / e / f)": target-instruction turn correctness rate at k = 1 / 4 / 8, then the
  plain turn correctness rate, in percent.
- Tables 7 / 9: the same layout with best speedups (target-instruction best, then best over all
  correct turns).

Every symbol means one thing: "0.0" is a measured zero, NO_TURN ("n/a") a best speedup with no qualifying
turn, NOT_EVALUATED ("n/e") a group no GPU judged, and RANGE ("–") only ever separates min and max.
- Table 3 style: the Table 1 cell per prompt variant (rows model / arch / variant).
- Table 4 style: one row per condition (model, arch), the k = 8 cell per problem plus the mean.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence

from ptxcore.metrics import TurnMetrics, TurnOutcome, VariantSpread
from ptxcore.schema import EvaluationStatus, FrozenModel

NOT_EVALUATED = "n/e"
"""Cell text for a (model, arch, problem) none of whose turns was judged (no GPU judge)."""
NO_TURN = "n/a"
"""Cell text for a best speedup (or rate) with no qualifying turn: there is nothing to take the best of."""
RANGE = "–"
"""Separates min and max of a range, and is used for nothing else."""
LEGEND = (f'"0.0" is a measured zero; "{NO_TURN}": no qualifying turn (no correct turn, so no speedup); '
          f'"{NOT_EVALUATED}": not evaluated (no GPU verdict for that model, architecture and problem); '
          f'"a{RANGE}b" is a range from a to b.')
"""One sentence that explains the symbols, for the report's notes."""

Unjudged = frozenset[tuple[str, str, str]]
"""(model, arch, definition) groups without a single judged turn."""


class ReportError(ValueError):
    """The selection cannot be laid out (e.g. two runs for one table cell)."""


class Table(FrozenModel):
    """A rendered table: a title, a header row and string cells."""

    title: str
    """Caption."""
    header: list[str]
    """Column names."""
    rows: list[list[str]]
    """Cells, row by row."""
    key: str = ""
    """Stable identifier (anchor in HTML)."""


def fmt_rate(x: float | None) -> str:
    """A rate as a percentage with one decimal ("0.0" for zero); NO_TURN when there is none."""
    return NO_TURN if x is None else f"{100 * x:.1f}"


def fmt_speedup(x: float | None) -> str:
    """A speedup with two decimals; NO_TURN when no turn qualifies."""
    return NO_TURN if x is None else f"{x:.2f}"


def fmt_range(mean: float | None, lo: float | None, hi: float | None) -> str:
    """Mean [min–max] of rates, in percent."""
    return f"{fmt_rate(mean)} [{fmt_rate(lo)}{RANGE}{fmt_rate(hi)}]"


def triple_cell(target: Sequence[str], allv: Sequence[str]) -> str:
    return f"target {' / '.join(target)} (all {' / '.join(allv)})"


def _index(metrics: Iterable[TurnMetrics], with_variant: bool = False) -> dict[tuple, dict[int, TurnMetrics]]:
    """(model, arch[, variant], definition) -> {k: metrics}; refuses two runs for one cell."""
    cells: dict[tuple, dict[int, TurnMetrics]] = defaultdict(dict)
    runs: dict[tuple, str] = {}
    for m in metrics:
        key = (m.model, m.arch, m.prompt_variant, m.definition) if with_variant else (m.model, m.arch, m.definition)
        if runs.setdefault(key, m.run) != m.run:
            raise ReportError(
                f"two runs for {m.model} / {m.arch} / {m.definition}: {runs[key]} and {m.run}; select one of them"
            )
        cells[key][m.k] = m
    return cells


def _cell(by_k: dict[int, TurnMetrics], ks: Sequence[int], speed: bool) -> str:
    if speed:
        return triple_cell([fmt_speedup(by_k[k].target_best_speedup) for k in ks],
                           [fmt_speedup(by_k[k].best_speedup) for k in ks])
    return triple_cell([fmt_rate(by_k[k].target_turn_correct_rate) for k in ks],
                       [fmt_rate(by_k[k].turn_correct_rate) for k in ks])


_GPU_VERDICTS = frozenset({
    EvaluationStatus.PASSED, EvaluationStatus.INCORRECT_SHAPE, EvaluationStatus.INCORRECT_NUMERICAL,
    EvaluationStatus.INCORRECT_DTYPE, EvaluationStatus.RUNTIME_ERROR, EvaluationStatus.TIMEOUT,
    EvaluationStatus.REWARD_HACK,
})
"""Verdicts only a GPU judge gives: a group with none of them had no chance to be correct or fast."""


def unjudged_groups(outcomes: Iterable[TurnOutcome]) -> Unjudged:
    """Groups with turns left unjudged (NOT_EVALUATED / INFRA_ERROR) and no GPU verdict at all: their
    zeros would mean nothing (CPU-only verdicts such as COMPILE_ERROR cannot make a group judged)."""
    gpu_judged, unjudged_turns = set(), set()
    for o in outcomes:
        key = (o.model, o.arch, o.definition)
        if o.status in _GPU_VERDICTS:
            gpu_judged.add(key)
        elif o.status in (EvaluationStatus.NOT_EVALUATED, EvaluationStatus.INFRA_ERROR):
            unjudged_turns.add(key)
    return frozenset(unjudged_turns - gpu_judged)


def _layout(metrics: Sequence[TurnMetrics], ks: Sequence[int], speed: bool, title: str, key: str,
            unjudged: Unjudged, render=None) -> list[Table]:  # noqa: ANN001 - render: {k: TurnMetrics} -> str
    """Per architecture: one row per model, one column per problem; `render` draws a cell (default: the paper's)."""
    render = render or (lambda c: _cell(c, ks, speed))
    cells = _index(metrics)
    tables = []
    for arch in sorted({m.arch for m in metrics}):
        defs = sorted({d for (_, a, d) in cells if a == arch})
        models = sorted({mo for (mo, a, _) in cells if a == arch})
        rows = [[model] + [_pick(cells, (model, arch, d), unjudged, render) for d in defs] for model in models]
        tables.append(Table(title=f"{title} — {arch}", header=["model", *defs], rows=rows, key=f"{key}_{arch}"))
    return tables


def _pick(cells: dict, key: tuple, unjudged: Unjudged, render) -> str:
    if key not in cells:
        return ""
    if (key[0], key[1], key[-1]) in unjudged:
        return NOT_EVALUATED
    return render(cells[key])


def correctness_tables(metrics: Sequence[TurnMetrics], ks: Sequence[int] = (1, 4, 8),
                       unjudged: Unjudged = frozenset()) -> list[Table]:
    """Tables 1 / 8: turn correctness rates (percent) per architecture."""
    return _layout(metrics, ks, False, f"Turn correctness rate, % (k = {' / '.join(map(str, ks))})", "table1",
                   unjudged)


def speedup_tables(metrics: Sequence[TurnMetrics], ks: Sequence[int] = (1, 4, 8),
                   unjudged: Unjudged = frozenset()) -> list[Table]:
    """Tables 7 / 9: best speedups per architecture."""
    return _layout(metrics, ks, True, f"Best speedup (k = {' / '.join(map(str, ks))})", "table7", unjudged)


def prompt_level_table(by_variant: Sequence[TurnMetrics], ks: Sequence[int] = (1, 4, 8),
                       unjudged: Unjudged = frozenset()) -> Table:
    """Table 3 style: the correctness cell per prompt variant."""
    cells = _index(by_variant, with_variant=True)
    defs = sorted({k[3] for k in cells})
    rows = []
    for model, arch, variant in sorted({k[:3] for k in cells}):
        rows.append([model, arch, variant or ""] + [
            _pick(cells, (model, arch, variant, d), unjudged, lambda c: _cell(c, ks, False)) for d in defs])
    return Table(title="Turn correctness rate by prompt variant, %", header=["model", "arch", "variant", *defs],
                 rows=rows, key="table3")


def condition_table(metrics: Sequence[TurnMetrics], k: int = 8, unjudged: Unjudged = frozenset()) -> Table:
    """Table 4 style: per condition (model, arch) the k-turn cell per problem and the mean over problems."""
    cells = _index(metrics)
    defs = sorted({d for (_, _, d) in cells})
    rows = []
    for model, arch in sorted({(mo, a) for (mo, a, _) in cells}):
        present = [cells[(model, arch, d)][k] for d in defs
                   if (model, arch, d) in cells and (model, arch, d) not in unjudged]
        cols = [_pick(cells, (model, arch, d), unjudged,
                      lambda c: f"target {fmt_rate(c[k].target_turn_correct_rate)} (all {fmt_rate(c[k].turn_correct_rate)})")
                for d in defs]
        mean = NOT_EVALUATED
        if present:
            mean_t = sum(m.target_turn_correct_rate for m in present) / len(present)
            mean_a = sum(m.turn_correct_rate for m in present) / len(present)
            mean = f"target {fmt_rate(mean_t)} (all {fmt_rate(mean_a)})"
        rows.append([model, arch, *cols, mean])
    return Table(title=f"Turn correctness rate by condition, % (k = {k})", header=["condition", "arch", *defs, "mean"],
                 rows=rows, key="table4")


def variant_spread_table(spread: Sequence[VariantSpread], k: int = 8, unjudged: Unjudged = frozenset()) -> Table:
    """Mean [min–max] across prompt variants of the k-turn rates."""
    rows = []
    for s in sorted((s for s in spread if s.k == k), key=lambda s: (s.arch, s.model, s.definition, s.run)):
        if (s.model, s.arch, s.definition) in unjudged:
            rows.append([s.model, s.arch, s.definition, str(s.n_variants), NOT_EVALUATED, NOT_EVALUATED])
            continue
        rows.append([s.model, s.arch, s.definition, str(s.n_variants),
                     fmt_range(s.target_turn_correct_rate_mean, s.target_turn_correct_rate_min,
                               s.target_turn_correct_rate_max),
                     fmt_range(s.turn_correct_rate_mean, s.turn_correct_rate_min, s.turn_correct_rate_max)])
    return Table(title=f"Spread across prompt variants (k = {k}): mean [min{RANGE}max], %",
                 header=["model", "arch", "problem", "variants", "target", "all"], rows=rows, key="variant_spread")


def status_table(outcomes: Sequence[TurnOutcome]) -> Table:
    """Share of each turn status per (model, arch), percent of that row's turns."""
    counts: dict[tuple[str, str], dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for o in outcomes:
        counts[(o.model, o.arch)][o.status.value] += 1
    statuses = sorted({s for c in counts.values() for s in c})
    rows = []
    for (model, arch), c in sorted(counts.items()):
        total = sum(c.values())
        rows.append([model, arch, str(total)] + [fmt_rate(c.get(s, 0) / total) for s in statuses])
    return Table(title="Turn statuses, % of turns", header=["model", "arch", "turns", *statuses], rows=rows,
                 key="statuses")
