"""Reports: the paper's table layouts, Markdown/HTML rendering and PNG figures (matplotlib, Agg).

Works on `ptxcore.metrics.TurnOutcome`s; it never opens the warehouse itself (the CLI passes data in).
"""

from .build import STEPS, build_report
from .render import Figure, ReportDoc, to_html, to_markdown
from .tables import ReportError, Table, correctness_tables, speedup_tables

__all__ = [
    "STEPS", "Figure", "ReportDoc", "ReportError", "Table", "build_report", "correctness_tables",
    "speedup_tables", "to_html", "to_markdown",
]
