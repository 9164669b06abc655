"""ptxcore.metrics (see ARCHITECTURE.md)."""
