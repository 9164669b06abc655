"""Terminal output that a person and a pipe can both use.

Tables never truncate a cell: on a terminal narrower than the table, long cells fold onto further lines;
when stdout is not a terminal (a pipe, a file, a test runner) the table is drawn as wide as it needs, so
`ptxbench problems list | grep mha` sees whole names. Cells are plain text (no rich markup), so values such
as `[0.0–15.6]` print as they are. Floats are rounded where they are formatted (`fmt_float`).
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Iterable, Sequence
from typing import Any

import typer
from rich.console import Console
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text

HIDDEN_CATEGORIES = ("Cc", "Cf", "Zl", "Zp", "Cs")
"""Unicode categories a cell never prints raw: controls (escape sequences, newlines), format characters (bidi
overrides and isolates such as U+202E, zero-width spaces and joiners, the BOM), line and paragraph separators,
and lone surrogates."""
HIDDEN = (r"[\u0000-\u001f\u007f-\u009f\u00ad\u0600-\u0605\u061c\u06dd\u070f\u0890-\u0891\u08e2\u180e"
          r"\u200b-\u200f\u2028-\u202e\u2060-\u2064\u2066-\u206f\ud800-\udfff\ufeff\ufff9-\ufffb\U000110bd"
          r"\U000110cd\U00013430-\U00013438\U0001bca0-\U0001bca3\U0001d173-\U0001d17a\U000e0001\U000e0020-\U000e007f]")
"""Every code point of HIDDEN_CATEGORIES (Unicode 14; tests/cli/test_terminal.py checks it against unicodedata)."""


@functools.cache
def _hidden(keep: str) -> re.Pattern[str]:
    return re.compile(f"(?![{re.escape(keep)}]){HIDDEN}" if keep else HIDDEN)


def _escape(match: re.Match[str]) -> str:
    return match.group().encode("unicode_escape", "backslashreplace").decode("ascii")


def visible(text: str, keep: str = "") -> str:
    """`text` with every control, bidi, zero-width and separator character written as its escape (`\\x1b`,
    `\\u202e`, `\\n`), so what a terminal shows is what the cell holds; characters in `keep` stay as they are."""
    return _hidden(keep).sub(_escape, text)


def table(title: str, columns: Sequence[str], right: Iterable[str] = (), ids: Iterable[str] | None = None) -> Table:
    """A rich table whose columns fold instead of truncating. `right`: right-aligned (numeric) columns; `ids`:
    columns of identifiers, which stay on one line as long as the terminal allows (default: the first)."""
    t = Table(title=title, title_justify="left")
    align, whole = set(right), set(columns[:1] if ids is None else ids)
    for c in columns:
        t.add_column(c, overflow="fold", justify="right" if c in align else "left", no_wrap=c in whole)
    return t


def add_row(t: Table, *cells: object) -> None:
    """Cells as plain text (None shows empty), hidden characters escaped (`visible`)."""
    t.add_row(*(Text("" if c is None else visible(str(c))) for c in cells))


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
