"""Reports: the paper's table layouts, Markdown/HTML rendering and PNG figures (matplotlib, Agg).

Works on `ptxcore.metrics.TurnOutcome`s; it never opens the warehouse itself (the CLI passes data in).
"""

from .build import STEPS, Computed, build_report, compute
from .render import Figure, ReportDoc, to_html, to_markdown
from .tables import ReportError, Table, correctness_tables, speedup_tables

__all__ = [
    "STEPS", "Computed", "Figure", "ReportDoc", "ReportError", "Table", "build_report", "compute", "correctness_tables",
    "speedup_tables", "to_html", "to_markdown",
]
