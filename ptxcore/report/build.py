"""Assemble a report (Markdown + HTML + PNGs) from turn outcomes; the caller reads them from the warehouse."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from pathlib import Path

from ptxcore.metrics import (
    TURN_LIMITS,
    FastPBand,
    TurnMetrics,
    TurnOutcome,
    fast_p_bands,
    fast_p_curves,
    turn_metrics,
    variant_spread,
)
from ptxcore.schema import EvaluationStatus, FrozenModel

from . import generalization, plots
from .render import Figure, ReportDoc, to_html, to_markdown
from .tables import (
    LEGEND,
    RECORDED,
    ReportError,
    condition_table,
    correctness_tables,
    k_label,
    prompt_level_table,
    recorded_groups,
    speedup_tables,
    status_table,
    unjudged_groups,
    variant_spread_table,
)
from .work_tables import WORK_NOTE, has_work, work_tables

log = logging.getLogger(__name__)

DEFINITIONS_NOTE = (
    "Turn correctness rate @k = correct turns among the first k turns of every trajectory / (trajectories × k), "
    "a k beyond the turn budget counting the whole budget; target-instruction rate counts only correct turns whose "
    "architecture-specific instructions were verified to execute (unknown counts as not executed). Best speedup @k "
    "= best speedup over those turns. Cells read \"target a / b / c (all d / e / f)\" for the k of the table's "
    "title. " + LEGEND
)

STEPS = ("metrics", "tables", "fast_p_inst.png", "fast_p.png", "status_by_turn.png", "transitions.png",
         "reasoning_vs_speedup.png", "generalization.png", "fast_p_work.png", "write")
"""Progress steps reported through `on_step` ("generalization.png" only when the runs have such problems,
"fast_p_work.png" only when some turn has a target-work verdict)."""


def _notes(outcomes: Sequence[TurnOutcome]) -> list[str]:
    runs = sorted({o.run for o in outcomes})
    trajectories = {(o.run, o.trajectory_id) for o in outcomes}
    unjudged = sum(o.status in (EvaluationStatus.NOT_EVALUATED, EvaluationStatus.INFRA_ERROR) for o in outcomes)
    shown = ", ".join(runs[:12]) + (f", … ({len(runs)} in all)" if len(runs) > 12 else "")
    notes = [f"Runs: {shown}. {len(trajectories)} trajectories, {len(outcomes)} turns, "
             f"models: {', '.join(sorted({o.model for o in outcomes}))}; "
             f"architectures: {', '.join(sorted({o.arch for o in outcomes}))}.", DEFINITIONS_NOTE]
    if unjudged:
        notes.append(f"{unjudged} turns were not evaluated (NOT_EVALUATED: no GPU judge, or INFRA_ERROR); they count "
                     "as played but not correct, so the rates are lower bounds for these runs.")
    short = _stopped_early(outcomes)
    if short:
        notes.append(f"{short} of {len(trajectories)} trajectories ended before their turn budget (the target speedup "
                     "reached, or the context full); their unplayed turns stay in the denominators.")
    recorded = [o for o in outcomes if o.recorded_from is not None]
    if recorded:
        sources = "; ".join(sorted({o.recorded_from for o in recorded if o.recorded_from}))
        notes.append(f"{len(recorded)} of {len(outcomes)} turns carry verdicts recorded earlier ({sources}) and reused "
                     "for the same kernel, problem, workload and architecture: their correctness, speedups and "
                     f"target evidence were not measured in these runs. Cells resting on them end in \"{RECORDED}\".")
    return notes


def _stopped_early(outcomes: Sequence[TurnOutcome]) -> int:
    played: dict[tuple[str, str], tuple[int, int]] = {}
    for o in outcomes:
        n, budget = played.get((o.run, o.trajectory_id), (0, o.max_turns))
        played[(o.run, o.trajectory_id)] = (max(n, o.turn + 1), budget)
    return sum(n < budget for n, budget in played.values())


class Computed(FrozenModel):
    """Metrics already computed elsewhere (the CLI reads them from the warehouse's SQL views)."""

    metrics: list[TurnMetrics]
    """Pooled turn metrics at k = 1, 4, 8."""
    by_variant: list[TurnMetrics]
    """The same per prompt variant."""
    bands: list[FastPBand]
    """Fast_p bands across prompt variants."""


def compute(outcomes: Sequence[TurnOutcome]) -> Computed:
    """The report's metrics via the Python API (identical to the SQL views)."""
    return Computed(metrics=turn_metrics(outcomes, TURN_LIMITS),
                    by_variant=turn_metrics(outcomes, TURN_LIMITS, by_variant=True),
                    bands=fast_p_bands(fast_p_curves(outcomes)))


def build_report(outcomes: Sequence[TurnOutcome], out_dir: Path, title: str,
                 on_step: Callable[[str], None] = lambda step: None, computed: Computed | None = None) -> list[Path]:
    """Write report.md, report.html and the PNGs into out_dir; returns the written paths."""
    if not outcomes:
        raise ReportError("no turns to report")
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    on_step("metrics")
    c = computed or compute(outcomes)
    metrics, by_variant, bands = c.metrics, c.by_variant, c.bands
    on_step("tables")
    unjudged, recorded = unjudged_groups(outcomes), recorded_groups(outcomes)
    marks = {"unjudged": unjudged, "recorded": recorded}
    tables = [*correctness_tables(metrics, **marks), *speedup_tables(metrics, **marks),
              prompt_level_table(by_variant, **marks), condition_table(metrics, **marks),
              variant_spread_table(variant_spread(by_variant), **marks, k_text=k_label(metrics, [8])),
              status_table(outcomes)]
    figures = [
        ("fast_p_inst.png", "Figure 2 style: Fast_p^Inst per problem, mean over prompt variants with min–max band",
         lambda p: plots.plot_fast_p(bands, p, inst=True, unjudged=unjudged)),
        ("fast_p.png", "Fast_p (any correct turn) per problem, mean over prompt variants with min–max band",
         lambda p: plots.plot_fast_p(bands, p, inst=False, unjudged=unjudged)),
        ("status_by_turn.png", "Figures 7/9 style: status mix at every turn index",
         lambda p: plots.plot_status_by_turn(outcomes, p)),
        ("transitions.png", "Figures 7/9 style: error-state transitions between consecutive turns",
         lambda p: plots.plot_transitions(outcomes, p)),
        ("reasoning_vs_speedup.png", "Figure 15 style: reasoning tokens vs speedup",
         lambda p: plots.plot_reasoning_vs_speedup(outcomes, p)),
    ]
    if generalization.has_generalization(metrics):
        tables.append(generalization.generalization_table(metrics, unjudged=unjudged))
        figures.append(("generalization.png", "Figure 6 style: generalization problems (d64, d96, GQA): "
                        "target-correct turn rate and best target speedup at k = 8, the d128 base as a dot",
                        lambda p: generalization.plot_generalization(metrics, p, unjudged=unjudged)))
    if has_work(metrics):
        tables += [*work_tables(metrics, unjudged=unjudged, recorded=recorded),
                   *work_tables(metrics, unjudged=unjudged, speed=True, recorded=recorded)]
        figures.append(("fast_p_work.png", "Fast_p^Work (beyond the paper): correct turns whose target path carried "
                        "the work, mean over prompt variants with min–max band",
                        lambda p: plots.plot_fast_p(bands, p, work=True, unjudged=unjudged)))
    written = []
    for name, _, draw in figures:
        on_step(name)
        written.append(draw(out_dir / name))
    on_step("write")
    suffix = f" ({RECORDED} verdicts: see the notes)" if recorded else ""
    notes = _notes(outcomes) + ([WORK_NOTE] if has_work(metrics) else [])
    doc = ReportDoc(title=title, notes=notes, tables=tables,
                    figures=[Figure(file=name, caption=caption + suffix) for name, caption, _ in figures])
    (out_dir / "report.md").write_text(to_markdown(doc))
    (out_dir / "report.html").write_text(to_html(doc))
    log.info("report for %d turns written to %s", len(outcomes), out_dir)
    return [out_dir / "report.md", out_dir / "report.html", *written]
