"""`ptxbench report sft | retrieval | reasoning | recipes`: the adapt tables (8, 9, 4, 10) and Figure 15."""

from __future__ import annotations

from pathlib import Path

import typer

from .errors import UserError, one_line_errors
from .warehouse import DB_OPTION, open_warehouse, warehouse_errors

RUNS_ARG = typer.Argument(None, help="Run (campaign) ids or shell globs; with --published, leave out.")
OUT_OPTION = typer.Option(..., "--out", help="Folder for report.md, report.html (and PNGs).")
SUBSET_OPTION = typer.Option(None, "--trajectories", help="all | paper | first:N | variants:A,B,... (default: all; "
                             "with --published: paper, the paper's 3 of 5 prompt variants per problem).")
PUBLISHED_OPTION = typer.Option(False, "--published", help="The authors' runs behind the paper's table (after "
                                "`ptxbench warehouse import-ptxbench`).")


def _selection(runs: list[str] | None, published: bool, published_runs: list[str], subset: str | None):
    from ptxcore.report.published import PUBLISHED_SUBSET
    from ptxcore.report.subsets import SubsetError, parse_subset

    if published and runs:
        raise UserError("give either run ids or --published, not both")
    if not published and not runs:
        raise UserError("name at least one run (id or glob), or pass --published")
    try:
        chosen = parse_subset(subset or (PUBLISHED_SUBSET if published else "all"))
    except SubsetError as exc:
        raise UserError(str(exc)) from exc
    return (published_runs if published else list(runs or [])), chosen


def _outcomes(db: str, patterns: list[str]):
    from ptxcore.warehouse import queries as Q
    from ptxcore.warehouse.retrieval import run_conditions

    with open_warehouse(db, read_only=True) as wh:
        runs = Q.select_runs(wh, patterns)
        return Q.turn_outcomes(wh, runs), run_conditions(wh, runs)


def _echo(paths: list[Path]) -> None:
    for p in paths:
        typer.echo(str(p))


def sft(runs: list[str] = RUNS_ARG, db: str = DB_OPTION, out: str = OUT_OPTION, trajectories: str = SUBSET_OPTION,
        published: bool = PUBLISHED_OPTION, title: str = typer.Option("", "--title", help="Report heading.")) -> None:
    """Tables 8 and 9 (SFT checkpoints vs their base, Table 1 / 7 layout) and Figure 15 (reasoning lengths)."""
    from ptxcore.report.adapt_build import build_sft_report
    from ptxcore.report.published import published_sft_runs

    patterns, subset = _selection(runs, published, published_sft_runs(), trajectories)
    with warehouse_errors():
        outcomes, _ = _outcomes(db, patterns)
        _echo(build_sft_report(outcomes, Path(out), title or "SFT models vs base (Tables 8, 9; Figure 15)", subset))


def retrieval(runs: list[str] = RUNS_ARG, db: str = DB_OPTION, out: str = OUT_OPTION, trajectories: str = SUBSET_OPTION,
              published: bool = PUBLISHED_OPTION, title: str = typer.Option("", "--title", help="Report heading."),
              beside: str = typer.Option(None, "--beside-published", help="A warehouse holding the authors' runs "
                                         "(`ptxbench warehouse import-ptxbench`): their Table 4 re-tabulated beside "
                                         "the runs named here.")) -> None:
    """Table 4: turn metrics by repair-retrieval condition (none / notes / notes+fixed ORACLE)."""
    from ptxcore.report.adapt_build import build_retrieval_report
    from ptxcore.report.published import PUBLISHED_RETRIEVAL_RUNS, PUBLISHED_SUBSET
    from ptxcore.report.subsets import parse_subset

    if beside and published:
        raise UserError("--beside-published adds the authors' runs to yours: name your runs, not --published")
    patterns, subset = _selection(runs, published, PUBLISHED_RETRIEVAL_RUNS, trajectories)
    with warehouse_errors():
        outcomes, conditions = _outcomes(db, patterns)
        other = None
        if beside:
            theirs, their_conditions = _outcomes(beside, PUBLISHED_RETRIEVAL_RUNS)
            other = (theirs, their_conditions, parse_subset(PUBLISHED_SUBSET))
        label = "published runs" if published else "these runs"
        _echo(build_retrieval_report(outcomes, conditions, Path(out), title or "Repair retrieval (Table 4)", subset,
                                     published=other, label=label))


def reasoning(runs: list[str] = RUNS_ARG, db: str = DB_OPTION, out: str = OUT_OPTION,
              trajectories: str = SUBSET_OPTION, published: bool = PUBLISHED_OPTION,
              title: str = typer.Option("", "--title", help="Report heading.")) -> None:
    """Figure 15: reasoning tokens per turn by model and problem (--published: base, s0, s3, Gemini 3.1 Pro)."""
    from ptxcore.report.adapt_build import build_reasoning_report
    from ptxcore.report.published import PUBLISHED_FIGURE15_RUNS

    patterns, subset = _selection(runs, published, PUBLISHED_FIGURE15_RUNS, trajectories)
    with warehouse_errors():
        outcomes, _ = _outcomes(db, patterns)
        _echo(build_reasoning_report(outcomes, Path(out), title or "Reasoning lengths (Figure 15)", subset))


def recipes(manifests: list[str] = typer.Argument(..., help="Recipe manifest JSON files (one per recipe)."),
            out: str = OUT_OPTION, title: str = typer.Option("", "--title", help="Report heading.")) -> None:
    """Table 10: recipes with rows written and rows dropped (by reason), from their manifests."""
    from ptxcore.report import ReportError
    from ptxcore.report.adapt_build import build_recipes_report
    from ptxcore.report.recipes import ManifestError, load_manifest

    try:
        loaded = [load_manifest(m) for m in manifests]
        paths = build_recipes_report(loaded, Path(out), title or "SFT recipes (Table 10)")
    except (ManifestError, ReportError) as exc:
        raise UserError(str(exc)) from exc
    _echo(paths)


def register(app: typer.Typer) -> None:
    """Add the adapt report commands to `ptxbench report`."""
    for fn in (sft, retrieval, reasoning, recipes):
        app.command(fn.__name__)(one_line_errors(fn))
