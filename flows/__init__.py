"""Prefect flows and the `ptxbench` command line (the top layer: flows -> tasks -> ptxcore)."""

from .offline import apply_offline_defaults

apply_offline_defaults()  # before any flow, task or command imports litellm, MLflow or starts a Prefect server
