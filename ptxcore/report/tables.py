"""The paper's table layouts, built from `ptxcore.metrics` results (no I/O here).

- Tables 1 / 8: per architecture, one row per model, one column per problem; a cell reads
  "target a / b / c (all d / e / f)": target-instruction turn correctness rate at k = 1 / 4 / 8, then the
  plain turn correctness rate, in percent.
- Tables 7 / 9: the same layout with best speedups (target-instruction best, then best over all
  correct turns).

Every symbol means one thing: "0.0" is a measured zero, NO_TURN ("n/a") a best speedup with no qualifying
turn, NOT_EVALUATED ("n/e") a group no GPU judged, and RANGE ("–") only ever separates min and max.
- Table 3 style: the Table 1 cell per prompt variant (rows model / arch / variant).
- Table 4 layout: one row per model and architecture, the k = 8 cell per problem plus the mean.
- A cell whose numbers rest on verdicts reused from recorded judgements ends in RECORDED ("recorded", or
  "(n recorded)" where only some of its GPU verdicts were reused).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence

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
Recorded = dict[tuple[str, str, str], tuple[int, int]]
"""(model, arch, definition) -> (turns with a reused recorded verdict, GPU-judged turns), for groups with any."""
RECORDED = "recorded"
"""Marks a cell whose numbers rest on verdicts reused from recorded judgements (not measured in the run)."""


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


def recorded_groups(outcomes: Iterable[TurnOutcome]) -> Recorded:
    """Groups some of whose GPU verdicts were reused from recorded judgements: (reused, GPU-judged) turns."""
    counts: dict[tuple[str, str, str], list[int]] = defaultdict(lambda: [0, 0])
    for o in outcomes:
        if o.status in _GPU_VERDICTS:
            c = counts[(o.model, o.arch, o.definition)]
            c[0] += o.recorded_from is not None
            c[1] += 1
    return {k: (n, judged) for k, (n, judged) in counts.items() if n}


def recorded_mark(n: int, judged: int) -> str:
    """" recorded" when every GPU verdict behind a cell was reused, " (n recorded)" when some were."""
    return f" {RECORDED}" if n == judged else f" ({n} {RECORDED})"


def k_label(metrics: Sequence[TurnMetrics], ks: Sequence[int]) -> str:
    """"1 / 4 / 8", with a limit beyond the turn budget named for what it counts: "1 / 4 / 8 = all 5 turns"."""
    parts = []
    for k in ks:
        counted = {m.turns_counted for m in metrics if m.k == k and m.turns_counted}
        if not counted or counted == {k}:
            parts.append(str(k))
        elif len(counted) == 1:
            parts.append(f"{k} = all {counted.pop()} turns")
        else:
            parts.append(f"{k} (or all turns, where fewer)")
    return " / ".join(parts)


def _layout(metrics: Sequence[TurnMetrics], ks: Sequence[int], speed: bool, title: str, key: str,
            unjudged: Unjudged, recorded: Recorded,
            render: Callable[[dict[int, TurnMetrics]], str] | None = None) -> list[Table]:
    """Per architecture: one row per model, one column per problem; `render` draws a cell (default: the paper's)."""
    render = render or (lambda c: _cell(c, ks, speed))
    cells = _index(metrics)
    tables = []
    for arch in sorted({m.arch for m in metrics}):
        defs = sorted({d for (_, a, d) in cells if a == arch})
        models = sorted({mo for (mo, a, _) in cells if a == arch})
        rows = [[model] + [_pick(cells, (model, arch, d), unjudged, render, recorded) for d in defs]
                for model in models]
        tables.append(Table(title=f"{title} — {arch}", header=["model", *defs], rows=rows, key=f"{key}_{arch}"))
    return tables


def _pick(cells: dict, key: tuple, unjudged: Unjudged, render: Callable[[dict[int, TurnMetrics]], str],
          recorded: Recorded) -> str:
    if key not in cells:
        return ""
    group = (key[0], key[1], key[-1])
    if group in unjudged:
        return NOT_EVALUATED
    return render(cells[key]) + (recorded_mark(*recorded[group]) if group in recorded else "")


def correctness_tables(metrics: Sequence[TurnMetrics], ks: Sequence[int] = (1, 4, 8),
                       unjudged: Unjudged = frozenset(), recorded: Recorded | None = None) -> list[Table]:
    """Tables 1 / 8: turn correctness rates (percent) per architecture."""
    return _layout(metrics, ks, False, f"Turn correctness rate, % (k = {k_label(metrics, ks)})", "table1",
                   unjudged, recorded or {})


def speedup_tables(metrics: Sequence[TurnMetrics], ks: Sequence[int] = (1, 4, 8),
                   unjudged: Unjudged = frozenset(), recorded: Recorded | None = None) -> list[Table]:
    """Tables 7 / 9: best speedups per architecture."""
    return _layout(metrics, ks, True, f"Best speedup (k = {k_label(metrics, ks)})", "table7", unjudged,
                   recorded or {})


def prompt_level_table(by_variant: Sequence[TurnMetrics], ks: Sequence[int] = (1, 4, 8),
                       unjudged: Unjudged = frozenset(), recorded: Recorded | None = None) -> Table:
    """Table 3 style: the correctness cell per prompt variant."""
    cells = _index(by_variant, with_variant=True)
    defs = sorted({k[3] for k in cells})
    rows = []
    for model, arch, variant in sorted({k[:3] for k in cells}):
        rows.append([model, arch, variant or ""] + [
            _pick(cells, (model, arch, variant, d), unjudged, lambda c: _cell(c, ks, False), recorded or {})
            for d in defs])
    return Table(title=f"Turn correctness rate by prompt variant, % (k = {k_label(by_variant, ks)})",
                 header=["model", "arch", "variant", *defs], rows=rows, key="table3")


def _rate_pair(m: TurnMetrics) -> str:
    return f"target {fmt_rate(m.target_turn_correct_rate)} (all {fmt_rate(m.turn_correct_rate)})"


def condition_table(metrics: Sequence[TurnMetrics], k: int = 8, unjudged: Unjudged = frozenset(),
                    recorded: Recorded | None = None) -> Table:
    """Table 4 layout over models: per (model, arch) the k-turn cell per problem and the mean over problems (the
    adapt report's Table 4 proper, by repair-retrieval condition, is ptxcore.report.adapt_tables)."""
    cells, recorded = _index(metrics), recorded or {}
    defs = sorted({d for (_, _, d) in cells})
    rows = []
    for model, arch in sorted({(mo, a) for (mo, a, _) in cells}):
        present = [cells[(model, arch, d)][k] for d in defs
                   if (model, arch, d) in cells and (model, arch, d) not in unjudged]
        cols = [_pick(cells, (model, arch, d), unjudged, lambda c: _rate_pair(c[k]), recorded) for d in defs]
        mean = NOT_EVALUATED
        if present:
            mean_t = sum(m.target_turn_correct_rate for m in present) / len(present)
            mean_a = sum(m.turn_correct_rate for m in present) / len(present)
            marks = [recorded[(model, arch, d)] for d in defs if (model, arch, d) in recorded]
            mark = recorded_mark(sum(n for n, _ in marks), sum(j for _, j in marks)) if marks else ""
            mean = f"target {fmt_rate(mean_t)} (all {fmt_rate(mean_a)})" + mark
        rows.append([model, arch, *cols, mean])
    return Table(title=f"Turn correctness rate per model, mean over problems, % (k = {k_label(metrics, [k])})",
                 header=["model", "arch", *defs, "mean"], rows=rows, key="table4")


def variant_spread_table(spread: Sequence[VariantSpread], k: int = 8, unjudged: Unjudged = frozenset(),
                         recorded: Recorded | None = None, k_text: str = "") -> Table:
    """Mean [min–max] across prompt variants of the k-turn rates."""
    rows, recorded = [], recorded or {}
    for s in sorted((s for s in spread if s.k == k), key=lambda s: (s.arch, s.model, s.definition, s.run)):
        group = (s.model, s.arch, s.definition)
        if group in unjudged:
            rows.append([s.model, s.arch, s.definition, str(s.n_variants), NOT_EVALUATED, NOT_EVALUATED])
            continue
        mark = recorded_mark(*recorded[group]) if group in recorded else ""
        rows.append([s.model, s.arch, s.definition, str(s.n_variants),
                     fmt_range(s.target_turn_correct_rate_mean, s.target_turn_correct_rate_min,
                               s.target_turn_correct_rate_max) + mark,
                     fmt_range(s.turn_correct_rate_mean, s.turn_correct_rate_min, s.turn_correct_rate_max) + mark])
    return Table(title=f"Spread across prompt variants (k = {k_text or k}): mean [min{RANGE}max], %",
                 header=["model", "arch", "problem", "variants", "target", "all"], rows=rows, key="variant_spread")


def status_table(outcomes: Sequence[TurnOutcome]) -> Table:
    """Share of each turn status per (model, arch), percent of that row's turns; where any turn carries a verdict
    reused from a recorded judgement, how many do."""
    counts: dict[tuple[str, str], dict[str, int]] = defaultdict(lambda: defaultdict(int))
    reused: dict[tuple[str, str], int] = defaultdict(int)
    for o in outcomes:
        counts[(o.model, o.arch)][o.status.value] += 1
        reused[(o.model, o.arch)] += o.recorded_from is not None
    statuses = sorted({s for c in counts.values() for s in c})
    extra = ["recorded verdicts"] if any(reused.values()) else []
    rows = []
    for (model, arch), c in sorted(counts.items()):
        total = sum(c.values())
        rows.append([model, arch, str(total)] + [fmt_rate(c.get(s, 0) / total) for s in statuses]
                    + ([str(reused[(model, arch)])] if extra else []))
    return Table(title="Turn statuses, % of turns", header=["model", "arch", "turns", *statuses, *extra],
                 rows=rows, key="statuses")
