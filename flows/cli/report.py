"""`ptxbench report CAMPAIGN... --db FILE --out DIR` and `ptxbench report turn-metrics --db FILE --json`."""

from __future__ import annotations

import json

import typer
from typer.core import TyperGroup

from .errors import UserError, one_line_errors
from .report_adapt import register as register_adapt_reports
from .warehouse import DB_OPTION, open_warehouse, warehouse_errors


class _DefaultToBuild(TyperGroup):
    """`ptxbench report X ...` means `ptxbench report build X ...` unless X is a subcommand."""

    def parse_args(self, ctx, args):  # type: ignore[no-untyped-def]
        if args and args[0] not in self.commands and not args[0].startswith("-"):
            args = ["build", *args]
        return super().parse_args(ctx, args)


app = typer.Typer(cls=_DefaultToBuild, no_args_is_help=True,
                  help="Reports: `ptxbench report CAMPAIGN... --db FILE --out DIR`, or `report turn-metrics`.")
register_adapt_reports(app)  # report sft | retrieval | recipes (Tables 8, 9, 4, 10; Figure 15)


@app.command("build")
@one_line_errors
def build(
    campaigns: list[str] = typer.Argument(..., help="Campaign (run) ids or shell globs, e.g. 'opus48-*'."),
    db: str = DB_OPTION,
    out: str = typer.Option(..., "--out", help="Folder for report.md, report.html and the PNGs."),
    title: str = typer.Option("", "--title", help="Report heading (default: the campaign names)."),
) -> None:
    """Write the paper's tables (Markdown + HTML) and figures (PNG) for the selected campaigns."""
    from pathlib import Path

    from rich.progress import Progress

    from ptxcore.report import STEPS, Computed, build_report
    from ptxcore.warehouse import queries as Q

    with warehouse_errors():
        with open_warehouse(db, read_only=True) as wh:  # the tables' numbers come from the SQL views
            runs = Q.select_runs(wh, campaigns)
            outcomes = Q.turn_outcomes(wh, runs)
            computed = Computed(metrics=Q.turn_metrics_sql(wh, runs), by_variant=Q.turn_metrics_sql(wh, runs, True),
                                bands=Q.fast_p_bands_sql(wh, runs))
        with Progress(transient=True) as progress:
            task = progress.add_task("report", total=len(STEPS))

            def step(name: str) -> None:
                progress.update(task, advance=1, description=name)

            paths = build_report(outcomes, Path(out), title or f"PTXBench report: {', '.join(campaigns)}", step,
                                 computed)
    for p in paths:
        typer.echo(str(p))


@app.command("turn-metrics")
@one_line_errors
def turn_metrics_command(
    db: str = DB_OPTION,
    as_json: bool = typer.Option(False, "--json", help="Print the JSON array (one object per run, model, arch, "
                                 "definition, k; rates as fractions 0-1, as in the SQL views)."),
    runs: list[str] = typer.Option(None, "--run", help="Restrict to these runs (ids or globs); repeatable."),
) -> None:
    """Turn correctness rates (table: percent) and best speedups at k = 1, 4, 8 per (run, model, arch, definition);
    a k beyond the turn budget counts the whole budget, and verdicts reused from recorded judgements are counted."""
    from ptxcore.warehouse import queries as Q

    from .output import add_row, fmt_float, print_table, table

    with warehouse_errors(), open_warehouse(db, read_only=True) as wh:
        selected = Q.select_runs(wh, runs) if runs else None
        rows = Q.turn_metrics_json(wh, selected)
    if as_json:
        typer.echo(json.dumps(rows))
        return
    if not rows:
        raise UserError(f"no turns in {db}")
    numeric = ("k", "turns counted", "trajectories", "correct %", "target %", "best speedup", "target best speedup",
               "recorded turns")
    t = table(f"turn metrics ({len(rows)} rows; rates in percent, speedups x library; n/a: no correct turn)",
              ("run", "model", "arch", "definition", *numeric), right=numeric)
    for r in rows:
        pct = [fmt_float(100 * r[c], 1) for c in ("turn_correct_rate", "target_turn_correct_rate")]
        best = [fmt_float(r[c], 3) for c in ("best_speedup", "target_best_speedup")]
        add_row(t, r["run"], r["model"], r["arch"], r["definition"], r["k"], r["turns_counted"], r["n_trajectories"],
                *pct, *best, r["recorded_turns"])
    print_table(t)
    sources = sorted({s for r in rows if r["recorded_from"] for s in r["recorded_from"].split("; ")})
    if sources:
        typer.echo(f"recorded turns: verdicts reused from earlier judgements ({'; '.join(sources)}), not measured in "
                   "these runs. turns counted: min(k, turn budget).")
