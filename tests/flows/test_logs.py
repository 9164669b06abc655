"""Our loggers carry Prefect's API handler, which lets through only records made inside a run.

The in-run half (a warning of flows.campaign in the campaign run's logs, read back through the API) is in
test_campaign_flow.py::test_no_gpu_means_not_evaluated_and_warehouse_replay_rejudges.
"""

from __future__ import annotations

import logging
import warnings

from prefect.logging.handlers import APILogHandler

from flows.logs import BRIDGED_LOGGERS, bridge_run_logs


def test_bridge_is_attached_once_and_silent_outside_runs(monkeypatch):
    monkeypatch.setenv("PREFECT_LOGGING_TO_API_WHEN_MISSING_FLOW", "error")  # a record reaching it would raise
    bridge_run_logs()
    bridge_run_logs()
    for name in BRIDGED_LOGGERS:
        handlers = [h for h in logging.getLogger(name).handlers if isinstance(h, APILogHandler)]
        assert len(handlers) == 1 and logging.getLogger(name).getEffectiveLevel() <= logging.INFO
    handler = next(h for h in logging.getLogger("ptxcore").handlers if isinstance(h, APILogHandler))
    record = logging.LogRecord("ptxcore.gpu", logging.WARNING, __file__, 1, "outside any run", None, None)
    assert handler.filter(record) is False
    record.flow_run_id = "1b9d6bcd-bbfd-4b2d-9b5d-ab8dfbbd4bed"  # an explicit run id is let through
    assert handler.filter(record)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        logging.getLogger("ptxcore.gpu.judge").warning("outside any run: terminal only, no API, no warning")
