"""`ptxbench report CAMPAIGN... --db FILE --out DIR` and `ptxbench report turn-metrics --db FILE --json`."""

from __future__ import annotations

import json

import typer
from typer.core import TyperGroup

from .errors import UserError, one_line_errors
from .warehouse import DB_OPTION, open_warehouse, warehouse_errors


class _DefaultToBuild(TyperGroup):
    """`ptxbench report X ...` means `ptxbench report build X ...` unless X is a subcommand."""

    def parse_args(self, ctx, args):  # type: ignore[no-untyped-def]
        if args and args[0] not in self.commands and not args[0].startswith("-"):
            args = ["build", *args]
        return super().parse_args(ctx, args)


app = typer.Typer(cls=_DefaultToBuild, no_args_is_help=True,
                  help="Reports: `ptxbench report CAMPAIGN... --db FILE --out DIR`, or `report turn-metrics`.")


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

    from ptxcore.report import STEPS, build_report
    from ptxcore.warehouse import queries as Q

    with warehouse_errors():
        with open_warehouse(db, read_only=True) as wh:
            runs = Q.select_runs(wh, campaigns)
            outcomes = Q.turn_outcomes(wh, runs)
        with Progress(transient=True) as progress:
            task = progress.add_task("report", total=len(STEPS))

            def step(name: str) -> None:
                progress.update(task, advance=1, description=name)

            paths = build_report(outcomes, Path(out), title or f"PTXBench report: {', '.join(campaigns)}", step)
    for p in paths:
        typer.echo(str(p))


@app.command("turn-metrics")
@one_line_errors
def turn_metrics_command(
    db: str = DB_OPTION,
    as_json: bool = typer.Option(False, "--json", help="Print the JSON array (one object per run, model, arch, "
                                 "definition, k)."),
    runs: list[str] = typer.Option(None, "--run", help="Restrict to these runs (ids or globs); repeatable."),
) -> None:
    """Turn correctness rates and best speedups at k = 1, 4, 8 per (run, model, arch, definition)."""
    from ptxcore.warehouse import queries as Q

    with warehouse_errors(), open_warehouse(db, read_only=True) as wh:
        selected = Q.select_runs(wh, runs) if runs else None
        rows = Q.turn_metrics_json(wh, selected)
    if as_json:
        typer.echo(json.dumps(rows))
        return
    if not rows:
        raise UserError(f"no turns in {db}")
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"turn metrics ({len(rows)} rows)")
    for c in rows[0]:
        table.add_column(c)
    for r in rows:
        table.add_row(*(f"{v:.4f}" if isinstance(v, float) else ("" if v is None else str(v)) for v in r.values()))
    Console().print(table)
