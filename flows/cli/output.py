"""Terminal output that a person and a pipe can both use.

Tables never truncate a cell: on a terminal narrower than the table, long cells fold onto further lines;
when stdout is not a terminal (a pipe, a file, a test runner) the table is drawn as wide as it needs, so
`ptxbench problems list | grep mha` sees whole names. Cells are plain text (no rich markup), so values such
as `[0.0–15.6]` print as they are. Floats are rounded where they are formatted (`fmt_float`).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any

import typer
from rich.console import Console
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text


def table(title: str, columns: Sequence[str], right: Iterable[str] = (), ids: Iterable[str] | None = None) -> Table:
    """A rich table whose columns fold instead of truncating. `right`: right-aligned (numeric) columns; `ids`:
    columns of identifiers, which stay on one line as long as the terminal allows (default: the first)."""
    t = Table(title=title, title_justify="left")
    align, whole = set(right), set(columns[:1] if ids is None else ids)
    for c in columns:
        t.add_column(c, overflow="fold", justify="right" if c in align else "left", no_wrap=c in whole)
    return t


def add_row(t: Table, *cells: object) -> None:
    """Cells as plain text (None shows empty)."""
    t.add_row(*(Text("" if c is None else str(c)) for c in cells))


def console_for(renderable: Any = None, stderr: bool = False) -> Console:
    """This process's console; off a terminal, one as wide as the renderable needs (never narrower than 80),
    and for plain lines (no renderable) one that never wraps them."""
    console = Console(stderr=stderr)
    if console.is_terminal:
        return console
    if renderable is None:
        return Console(stderr=stderr, width=100_000, soft_wrap=True)
    for col in getattr(renderable, "columns", ()):
        col.no_wrap = True
    needed = Measurement.get(console, console.options.update(width=100_000), renderable).maximum
    return Console(stderr=stderr, width=max(80, needed), soft_wrap=False)


def print_table(t: Table) -> None:
    for col in t.columns:
        if col.overflow == "ellipsis":
            col.overflow = "fold"
    console_for(t).print(t)


NO_VALUE = "n/a"
"""A cell with nothing to show (a best speedup with no correct turn): said, never left blank."""


def fmt_float(x: float | None, digits: int = 3) -> str:
    """A float rounded for a table (NO_VALUE for None)."""
    return NO_VALUE if x is None else f"{x:.{digits}f}"


def echo_json(payload: Any) -> None:
    """JSON on stdout (indented; non-JSON values such as paths as strings)."""
    typer.echo(json.dumps(payload, indent=1, default=str))
