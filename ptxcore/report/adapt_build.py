"""Adapt reports (Markdown + HTML + PNG): SFT models (Tables 8 / 9, Figure 15), retrieval conditions
(Table 4) and recipes (Table 10). The caller reads turns and manifests; nothing here opens the warehouse."""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from ptxcore.metrics import TurnOutcome
from ptxcore.schema import RetrievalCondition

from .adapt_tables import by_condition, retrieval_tables, sft_tables
from .reasoning_plot import ALL_PROBLEMS, lengths_by_problem, plot_reasoning_lengths, summarize
from .recipes import RecipeManifest, inference_notes, recipe_table
from .render import Figure, ReportDoc, to_html, to_markdown
from .subsets import TrajectorySubset, trajectory_counts
from .tables import NO_TURN, ReportError, Table

log = logging.getLogger(__name__)
Step = Callable[[str], None]
FIGURE15 = "figure15_reasoning_lengths.png"
FIGURE15_CAPTION = "Figure 15: reasoning tokens per turn by model, per problem and over all problems (log scale)"

SUBSET_NOTE = (
    "The PTXBench authors' SFT-evaluation runs (and base Qwen3.6-27B's on Hopper) hold 20 trajectories, five prompt "
    "variants x 4, where the paper's cells are over three variants x 4: `paper` keeps p0, p1, p4 for GEMM, p0, p1, "
    "p2 for MHA forward and p0, p3, p4 for MHA backward (found by matching the paper's Tables 8 / 9) and keeps runs "
    "of three variants whole; `all` counts every recorded trajectory, as the authors' plot-viewer exports do."
)


def write_doc(doc: ReportDoc, out_dir: Path) -> list[Path]:
    """report.md and report.html of a document."""
    (out_dir / "report.md").write_text(to_markdown(doc))
    (out_dir / "report.html").write_text(to_html(doc))
    return [out_dir / "report.md", out_dir / "report.html"]


def _selection_notes(outcomes: Sequence[TurnOutcome], subset: TrajectorySubset) -> list[str]:
    counts = trajectory_counts(outcomes)
    spread = Counter(counts.values())
    shape = ", ".join(f"{n} runs with {k} trajectories" for k, n in sorted(spread.items()))
    return [f"Trajectory subset: {subset.label} ({shape}; {len(outcomes)} turns). {SUBSET_NOTE}",
            f"Runs: {', '.join(counts)}."]


def _prepare(outcomes: Sequence[TurnOutcome], subset: TrajectorySubset, out_dir: Path) -> list[TurnOutcome]:
    if not outcomes:
        raise ReportError("no turns to report")
    selected = subset.select(outcomes)
    if not selected:
        raise ReportError(f"the trajectory subset {subset.label} selects no turns")
    Path(out_dir).mkdir(parents=True, exist_ok=True)
    return selected


def reasoning_table(outcomes: Sequence[TurnOutcome]) -> Table:
    """The numbers behind Figure 15: median reasoning tokens per turn, by model and problem."""
    summary = summarize(lengths_by_problem(outcomes))
    panels = list(dict.fromkeys(s.panel for s in summary))
    cell = {(s.group, s.panel): s for s in summary}
    rows = []
    for model in dict.fromkeys(s.group for s in summary):
        whole = cell[(model, ALL_PROBLEMS)]
        rows.append([model, str(whole.n), str(whole.n_zero), NO_TURN if whole.p90 is None else f"{whole.p90:,.0f}",
                     *(NO_TURN if (model, p) not in cell or cell[(model, p)].median is None
                       else f"{cell[(model, p)].median:,.0f}" for p in panels)])
    return Table(title="Figure 15 data: median reasoning tokens per turn, by model and problem",
                 header=["model", "turns drawn", "turns without reasoning (left out)", "p90 (all problems)",
                         *(f"median: {p}" for p in panels)], rows=rows, key="figure15")


def build_reasoning_report(outcomes: Sequence[TurnOutcome], out_dir: Path, title: str,
                           subset: TrajectorySubset = TrajectorySubset(), on_step: Step = lambda s: None) -> list[Path]:
    """Figure 15 alone (the paper's: base model, KernelGen s0, Fixit s3, Gemini 3.1 Pro on Hopper)."""
    out_dir = Path(out_dir)
    selected = _prepare(outcomes, subset, out_dir)
    on_step(FIGURE15)
    png = plot_reasoning_lengths(lengths_by_problem(selected), out_dir / FIGURE15,
                                 title="Figure 15: reasoning length by model and problem")
    on_step("write")
    doc = ReportDoc(title=title, notes=_selection_notes(selected, subset), tables=[reasoning_table(selected)],
                    figures=[Figure(file=FIGURE15, caption=FIGURE15_CAPTION)])
    return [*write_doc(doc, out_dir), png]


def build_sft_report(outcomes: Sequence[TurnOutcome], out_dir: Path, title: str,
                     subset: TrajectorySubset = TrajectorySubset(), on_step: Step = lambda s: None) -> list[Path]:
    """Tables 8 and 9 and Figure 15 for SFT checkpoints and their base model."""
    out_dir = Path(out_dir)
    selected = _prepare(outcomes, subset, out_dir)
    on_step("tables")
    tables = [*sft_tables(selected), reasoning_table(selected)]
    on_step(FIGURE15)
    png = plot_reasoning_lengths(lengths_by_problem(selected), out_dir / FIGURE15,
                                 title="Figure 15 style: reasoning length by model and problem")
    on_step("write")
    doc = ReportDoc(title=title, notes=_selection_notes(selected, subset), tables=tables,
                    figures=[Figure(file=FIGURE15, caption=FIGURE15_CAPTION)])
    log.info("SFT report for %d turns written to %s", len(selected), out_dir)
    return [*write_doc(doc, out_dir), png]


def _retrieval_part(outcomes: Sequence[TurnOutcome], recorded: Mapping[str, RetrievalCondition],
                    subset: TrajectorySubset, label: str, key: str) -> tuple[list[Table], list[str]]:
    selected = subset.select(outcomes)
    if not selected:
        raise ReportError(f"the trajectory subset {subset.label} selects no turns of the {label} runs")
    tables = [t.model_copy(update={"title": f"{t.title} — {label}", "key": f"{t.key}{key}"})
              for t in retrieval_tables(selected, recorded)]
    conditions = sorted({o.model for o in by_condition(selected, recorded)})
    notes = [f"{label}: " + n for n in _selection_notes(selected, subset)] + [f"{label} conditions: {'; '.join(conditions)}."]
    return tables, notes


def build_retrieval_report(outcomes: Sequence[TurnOutcome], recorded: Mapping[str, RetrievalCondition],
                           out_dir: Path, title: str, subset: TrajectorySubset = TrajectorySubset(),
                           on_step: Step = lambda s: None,
                           published: tuple[Sequence[TurnOutcome], Mapping[str, RetrievalCondition],
                                            TrajectorySubset] | None = None,
                           label: str = "these runs") -> list[Path]:
    """Table 4: turn metrics by repair-retrieval condition; with `published`, the authors' runs re-tabulated beside."""
    out_dir = Path(out_dir)
    _prepare(outcomes, subset, out_dir)
    on_step("tables")
    tables, notes = _retrieval_part(outcomes, recorded, subset, label, "")
    if published is not None:
        more, more_notes = _retrieval_part(published[0], published[1], published[2], "published runs", "_published")
        tables, notes = tables + more, notes + more_notes
    notes.append("notes+fixed shows the model a verified fixed kernel of the same problem: it is an ORACLE condition, "
                 "not a fair comparison with the others.")
    on_step("write")
    return write_doc(ReportDoc(title=title, notes=notes, tables=tables, figures=[]), out_dir)


def build_recipes_report(manifests: Sequence[RecipeManifest], out_dir: Path, title: str) -> list[Path]:
    """Table 10 from recipe manifests."""
    if not manifests:
        raise ReportError("no manifests to report")
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    table = recipe_table(manifests)
    notes = [f"{len(manifests)} recipes; rows = rows written to the Parquet; dropped = rows left out, by reason (a "
             "budget drop names the counter that decided it). 'paper rows' is the row count the paper reports for that "
             "recipe id. 'token counter' is the vocabulary and chat template the 65,536-token budget was counted in; "
             "'fallback estimate' means tiktoken decided, not Qwen's vocabulary.", *inference_notes(manifests)]
    return write_doc(ReportDoc(title=title, notes=notes, tables=[table], figures=[]), out_dir)
