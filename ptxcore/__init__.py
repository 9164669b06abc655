"""ptxcore: the PTXBench domain library. No Prefect, no MLflow, ever (see docs/architecture.md)."""

__version__ = "0.1.0"
