"""`ptxbench sql "SELECT ..." --db FILE [--format table|csv|json]`: one read-only query over the warehouse.

The query is untrusted: `ptxcore.warehouse.usersql` accepts exactly one SELECT/EXPLAIN statement and runs it
on a read-only connection with DuckDB's external access off and its configuration locked.

Output: `table` (default) rounds floats to 4 significant digits, never truncates a column name or a value
and is as wide as it needs to be, also when piped; `csv` and `json` keep full precision and stream, so a
large result is never held in memory (json: an array of row objects; non-finite floats as the strings
"NaN" / "Infinity", as every JSON the project writes).
"""

from __future__ import annotations

import csv
import enum
import json
import math
import sys
from collections.abc import Iterable, Iterator
from typing import Any

import typer

from .errors import UserError, one_line_errors
from .output import visible
from .warehouse import DB_OPTION, warehouse_errors


class OutputFormat(str, enum.Enum):
    table = "table"
    csv = "csv"
    json = "json"


DEFAULT_TIMEOUT_S = 60.0
"""`--timeout-s` default (ptxcore.warehouse.usersql.DEFAULT_TIMEOUT_S)."""
SIGNIFICANT_DIGITS = 4
"""Significant digits of a float in the table view."""


def format_float(x: float) -> str:
    """A float for the table: 4 significant digits, no exponent between 1e-4 and 1e15."""
    if math.isnan(x):
        return "NaN"
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    if x == 0:
        return "0"
    magnitude = math.floor(math.log10(abs(x)))
    if magnitude < -4 or magnitude >= 15:
        return f"{x:.{SIGNIFICANT_DIGITS - 1}e}"
    decimals = max(0, SIGNIFICANT_DIGITS - 1 - magnitude)
    return f"{round(x, decimals):.{decimals}f}"


def _visible(text: str) -> str:
    """Control, bidi and zero-width characters (newlines, escape sequences, U+202E ...) shown escaped, so a cell is
    one line that shows what it holds."""
    return visible(text)


def table_cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return format_float(value)
    return _visible(str(value))


def column_cells(values: list[Any]) -> list[str]:
    """One column's cells: a float zero gets as many decimals as the column's other floats ("0.0000" beside
    "0.2500", never "0"), so a column of rates reads alike."""
    cells = [table_cell(v) for v in values]
    decimals = [len(c.split(".")[1]) for v, c in zip(values, cells, strict=True)
                if isinstance(v, float) and v != 0 and "." in c and "e" not in c]
    width = max(decimals, default=1)
    return [f"{0.0:.{width}f}" if isinstance(v, float) and v == 0 else c for v, c in zip(values, cells, strict=True)]


def unique_names(columns: list[str]) -> list[str]:
    """Column names made unique for JSON objects (`a, a` -> `a, a_1`)."""
    seen: set[str] = set()
    out = []
    for name in columns:
        candidate, n = name, 0
        while candidate in seen:
            n += 1
            candidate = f"{name}_{n}"
        seen.add(candidate)
        out.append(candidate)
    return out


def _json_value(value: Any) -> Any:
    """Non-finite floats as the strings "NaN" / "Infinity" / "-Infinity" (the project's JSON convention)."""
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    return value


def write_json(columns: list[str], rows: Iterable[tuple], out: Any) -> None:
    names = unique_names(columns)
    out.write("[")
    for i, row in enumerate(rows):
        obj = {k: _json_value(v) for k, v in zip(names, row, strict=True)}
        out.write(("," if i else "") + "\n " + json.dumps(obj, default=str, allow_nan=False))
    out.write("\n]\n")


CSV_KEEPS = "\t\n\r"
"""Characters CSV output leaves as they are: the csv module quotes a field holding them."""


def _csv_cell(value: Any) -> Any:
    if value is None:
        return ""
    if isinstance(value, float):
        return repr(value)
    return visible(value if isinstance(value, str) else str(value), keep=CSV_KEEPS)


def write_csv(columns: list[str], rows: Iterable[tuple], out: Any) -> None:
    """CSV (minimal quoting) with terminal controls, bidi and zero-width characters written as escapes (`\\x1b`,
    `\\u202e`): `cat`-ing the file cannot drive the terminal. Tabs and newlines stay (quoted, as CSV does). The
    escapes are not reversible for text that already holds such a sequence: --format json keeps values exact."""
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow([visible(c, keep=CSV_KEEPS) for c in columns])
    for row in rows:
        writer.writerow([_csv_cell(v) for v in row])


def print_table(columns: list[str], rows: Iterator[tuple], max_rows: int) -> None:
    from rich.cells import cell_len
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    raw, total = [], 0
    for row in rows:
        total += 1
        if len(raw) < max_rows:
            raw.append(row)
    shown = [list(cells) for cells in zip(*(column_cells([r[i] for r in raw]) for i in range(len(columns))),
                                          strict=True)] if raw else []
    title = f"{total} rows" + (f" (first {max_rows} shown)" if total > max_rows else "")
    table = Table()
    headers = [_visible(c) for c in columns]
    for i, name in enumerate(headers):
        numeric = any(_looks_numeric(r[i]) for r in shown[:50])
        table.add_column(Text(name), no_wrap=True, justify="right" if numeric else "left")
    for cells in shown:
        table.add_row(*(Text(c) for c in cells))
    console = Console(highlight=False)
    needed = sum(max([cell_len(h)] + [cell_len(r[i]) for r in shown]) + 3 for i, h in enumerate(headers)) + 1
    console.width = max(console.width if console.is_terminal else 0, needed)
    console.print(title, markup=False, soft_wrap=True)
    console.print(table)


def _looks_numeric(cell: str) -> bool:
    try:
        float(cell)
    except ValueError:
        return False
    return True


@one_line_errors
def sql_command(
    query: str = typer.Argument(..., help="One read-only statement, e.g. \"SELECT * FROM v_turn_metrics\"."),
    db: str = DB_OPTION,
    fmt: OutputFormat = typer.Option(OutputFormat.table, "--format", "-f", help="table, csv or json."),
    as_json: bool = typer.Option(False, "--json", help="Same as --format json."),
    max_rows: int = typer.Option(200, "--max-rows", min=1, help="Rows shown in the table view (csv/json: all)."),
    timeout_s: float = typer.Option(DEFAULT_TIMEOUT_S, "--timeout-s", min=0.001,
                                    help="Time limit of the statement, seconds (executing and fetching rows)."),
) -> None:
    """Run one read-only SQL statement against the warehouse (no file, network or extension access).

    Tables: campaigns, trajectories, turns, kernels, evaluations, target_evidence, reference_latencies,
    environments, invalidations, ptxbench_source_turns, fi_*. Views: v_turn_outcomes, v_turn_metrics,
    v_turn_metrics_by_variant, v_turn_metrics_variant_spread, v_fast_p, v_fast_p_bands, v_invalid_turns.
    """
    from ptxcore.warehouse.usersql import run_user_query

    if as_json:
        fmt = OutputFormat.json
    with warehouse_errors(), run_user_query(db, query, timeout_s) as result:
        if not result.columns:
            raise UserError("the statement returned no result set")
        if fmt is OutputFormat.json:
            write_json(result.columns, result.rows(), sys.stdout)
        elif fmt is OutputFormat.csv:
            write_csv(result.columns, result.rows(), sys.stdout)
        else:
            print_table(result.columns, result.rows(), max_rows)
