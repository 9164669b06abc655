"""ptxcore.gpu (see ARCHITECTURE.md)."""
