"""The offline switches of the libraries our commands start: no cost-map fetches, no telemetry.

litellm fetches its model cost map from GitHub when it is imported (three attempts, each a warning on a machine
without the network) unless LITELLM_LOCAL_MODEL_COST_MAP is set; MLflow's client sends usage telemetry (and logs
"Failed to send telemetry records" where it cannot) unless MLFLOW_DISABLE_TELEMETRY is set; a Prefect server
reports usage unless PREFECT_SERVER_ANALYTICS_ENABLED is false. Values already in the environment win.
`mlflow ui` is not started by us: `MLFLOW_UI_ENV` is what to put before it (README, and `campaign run` prints it).
"""

from __future__ import annotations

import os

OFFLINE_DEFAULTS = {
    "LITELLM_LOCAL_MODEL_COST_MAP": "True",
    "MLFLOW_DISABLE_TELEMETRY": "true",
    "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
}
"""Environment defaults set before litellm, MLflow or a Prefect server start in this process (and its children)."""

MLFLOW_UI_ENV = "LITELLM_LOCAL_MODEL_COST_MAP=True MLFLOW_DISABLE_TELEMETRY=true"
"""Prefix of the `mlflow ui` command we print: the UI imports litellm, which would fetch its cost map."""


def apply_offline_defaults() -> None:
    for key, value in OFFLINE_DEFAULTS.items():
        os.environ.setdefault(key, value)
