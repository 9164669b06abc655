"""ptxcore: the PTXBench domain library. No Prefect, no MLflow, ever (see ARCHITECTURE.md)."""

__version__ = "0.1.0"
