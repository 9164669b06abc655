"""ptxcore.report (see ARCHITECTURE.md)."""
