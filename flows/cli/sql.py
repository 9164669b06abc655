"""`ptxbench sql "SELECT ..." --db FILE`: run one read-only query against the warehouse."""

from __future__ import annotations

import json

import typer

from .errors import one_line_errors
from .warehouse import DB_OPTION, open_warehouse, warehouse_errors


@one_line_errors
def sql_command(
    query: str = typer.Argument(..., help="One SQL statement, e.g. \"SELECT * FROM v_turn_metrics\"."),
    db: str = DB_OPTION,
    as_json: bool = typer.Option(False, "--json", help="Print a JSON array of row objects."),
    max_rows: int = typer.Option(200, "--max-rows", min=1, help="Rows shown in the table view."),
) -> None:
    """Run one read-only SQL query against the warehouse.

    Tables: campaigns, trajectories, turns, kernels, evaluations, target_evidence, reference_latencies,
    environments, ptxbench_source_turns, fi_*. Views: v_turn_outcomes, v_turn_metrics,
    v_turn_metrics_by_variant, v_turn_metrics_variant_spread, v_fast_p, v_fast_p_bands.
    """
    with warehouse_errors(), open_warehouse(db, read_only=True) as wh:
        cols, rows = wh.sql(query)
    if as_json:
        typer.echo(json.dumps([dict(zip(cols, r, strict=True)) for r in rows], indent=1, default=str))
        return
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"{len(rows)} rows" + (f" (first {max_rows} shown)" if len(rows) > max_rows else ""))
    for c in cols:
        table.add_column(c)
    for r in rows[:max_rows]:
        table.add_row(*("" if v is None else str(v) for v in r))
    Console().print(table)
