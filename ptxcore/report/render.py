"""Markdown and HTML rendering of a report document (tables + figures + notes). No third-party markup."""

from __future__ import annotations

import html
import re

from ptxcore.schema import FrozenModel

from .tables import Table


class Figure(FrozenModel):
    """A PNG next to the report."""

    file: str
    """File name relative to the report."""
    caption: str
    """One-line caption."""


class ReportDoc(FrozenModel):
    """Everything a report shows, in order."""

    title: str
    """Heading."""
    notes: list[str]
    """Paragraphs above the tables (selection, counts, caveats)."""
    tables: list[Table]
    """Tables in order."""
    figures: list[Figure]
    """Figures in order."""


def _md_cell(text: str) -> str:
    return text.replace("|", "\\|")


def table_markdown(t: Table) -> str:
    lines = [f"### {t.title}", "", "| " + " | ".join(map(_md_cell, t.header)) + " |",
             "|" + "|".join("---" for _ in t.header) + "|"]
    lines += ["| " + " | ".join(map(_md_cell, row)) + " |" for row in t.rows]
    if not t.rows:
        lines.append("| " + " | ".join(["(no rows)"] + [""] * (len(t.header) - 1)) + " |")
    return "\n".join(lines)


def to_markdown(doc: ReportDoc) -> str:
    parts = [f"# {doc.title}", *doc.notes]
    parts += [table_markdown(t) for t in doc.tables]
    parts += [f"![{f.caption}]({f.file})\n\n*{f.caption}*" for f in doc.figures]
    return "\n\n".join(parts) + "\n"


_CSS = """
body{font-family:system-ui,sans-serif;margin:2em;max-width:1400px;color:#222}
div.table{overflow-x:auto;margin:0.5em 0 2em}
table{border-collapse:collapse;font-size:13px}
th,td{border:1px solid #ccc;padding:4px 8px;text-align:left;vertical-align:top}
th,span.nw{white-space:nowrap}
th{background:#f3f3f3} tr:nth-child(even) td{background:#fafafa}
td{font-variant-numeric:tabular-nums} img{max-width:100%;border:1px solid #ddd}
figure{margin:1em 0 2em} figcaption{font-style:italic;color:#555}
"""


_PARTS = re.compile(r" (?=\()")
"""A cell may break only before a parenthesis: "target a / b / c" and "(all d / e / f)" stay whole."""


def cell_html(text: str) -> str:
    """A table cell whose parts never wrap inside (a triple, a range, a number with its unit)."""
    return " ".join(f'<span class="nw">{html.escape(part)}</span>' for part in _PARTS.split(text))


def table_html(t: Table) -> str:
    e = html.escape
    head = "".join(f"<th>{e(h)}</th>" for h in t.header)
    body = "".join("<tr>" + "".join(f"<td>{cell_html(c)}</td>" for c in row) + "</tr>" for row in t.rows)
    return (f'<h3 id="{e(t.key)}">{e(t.title)}</h3>\n'
            f'<div class="table"><table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></div>')


def to_html(doc: ReportDoc) -> str:
    e = html.escape
    parts = [f"<!doctype html><html><head><meta charset='utf-8'><title>{e(doc.title)}</title>",
             f"<style>{_CSS}</style></head><body><h1>{e(doc.title)}</h1>"]
    parts += [f"<p>{e(n)}</p>" for n in doc.notes]
    parts += [table_html(t) for t in doc.tables]
    parts += [f'<figure><img src="{e(f.file)}" alt="{e(f.caption)}"><figcaption>{e(f.caption)}</figcaption></figure>'
              for f in doc.figures]
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"
