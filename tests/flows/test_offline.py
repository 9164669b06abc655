"""Our commands start litellm, MLflow and Prefect with their offline switches (no cost-map fetch, no telemetry)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from flows.offline import MLFLOW_UI_ENV, OFFLINE_DEFAULTS

PROBE = "import json, os, flows.cli.main; print(json.dumps({k: os.environ.get(k) for k in %r}))"


def _env_after_import(**preset: str) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in OFFLINE_DEFAULTS} | preset
    out = subprocess.run([sys.executable, "-c", PROBE % list(OFFLINE_DEFAULTS)], env=env, capture_output=True,
                         text=True, timeout=300, check=True)
    return json.loads(out.stdout)


def test_the_command_line_sets_the_offline_switches_and_keeps_the_users():
    assert _env_after_import() == OFFLINE_DEFAULTS
    assert _env_after_import(MLFLOW_DISABLE_TELEMETRY="false")["MLFLOW_DISABLE_TELEMETRY"] == "false"


def test_the_printed_mlflow_ui_command_carries_them():
    from flows.cli.campaign import _mlflow_ui_hint
    from ptxcore.agent import CampaignSummary

    summary = CampaignSummary(campaign_id="c", warehouse="w", mlflow_tracking_uri="sqlite:////x/mlflow.db",
                              mlflow_experiment="ptxbench/c", mlflow_ui_path="#/experiments/1?workflowType=machine_learning")
    hint = _mlflow_ui_hint(summary)
    assert hint.startswith(f"`{MLFLOW_UI_ENV} mlflow ui --backend-store-uri sqlite:////x/mlflow.db`")
    assert all(f"{k}=" in MLFLOW_UI_ENV for k in ("LITELLM_LOCAL_MODEL_COST_MAP", "MLFLOW_DISABLE_TELEMETRY"))
