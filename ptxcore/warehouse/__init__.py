"""ptxcore.warehouse (see ARCHITECTURE.md)."""
