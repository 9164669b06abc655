"""Our stdlib log lines in Prefect's run logs.

ptxcore logs with the standard library only (it never imports Prefect), and so do flows and tasks outside
`get_run_logger`. Prefect sends a logger's records to its API when that logger carries Prefect's
`APILogHandler` (what `PREFECT_LOGGING_EXTRA_LOGGERS` arranges at import time). `bridge_run_logs` attaches one
such handler to the `ptxcore`, `flows` and `tasks` loggers, behind a filter that passes only records made inside
a flow or task run: those land in that run's logs (a task's lines in the task run, the campaign's in the
campaign flow run), while the same code run outside Prefect (`ptxbench eval`, tests) sends nothing and warns
about nothing. Threads that should log into a run must run in a copy of its context (`contextvars`).
"""

from __future__ import annotations

import logging
import threading

BRIDGED_LOGGERS = ("ptxcore", "flows", "tasks")
"""Loggers whose records reach the Prefect run they are made in."""

_LOCK = threading.Lock()
_bridged = False


class _InRunOnly(logging.Filter):
    """Passes records that know their run (an explicit flow_run_id, or a Prefect run context); drops the rest."""

    def filter(self, record: logging.LogRecord) -> bool:
        if getattr(record, "flow_run_id", None):
            return True
        from prefect.context import FlowRunContext, TaskRunContext

        return FlowRunContext.get() is not None or TaskRunContext.get() is not None


def bridge_run_logs(level: int = logging.INFO) -> None:
    """Attach Prefect's API log handler to our loggers (once per process; idempotent).

    A logger without a level of its own gets `level`, so that INFO lines reach the run logs; the terminal keeps
    its handlers' levels (`ptxbench` shows warnings unless -v)."""
    global _bridged
    from prefect.logging.handlers import APILogHandler

    with _LOCK:
        if _bridged:
            return
        handler = APILogHandler()
        handler.addFilter(_InRunOnly())
        for name in BRIDGED_LOGGERS:
            logger = logging.getLogger(name)
            if any(isinstance(h, APILogHandler) for h in logger.handlers):  # PREFECT_LOGGING_EXTRA_LOGGERS did it
                continue
            logger.addHandler(handler)
            if logger.level == logging.NOTSET:
                logger.setLevel(level)
        _bridged = True
