"""ptxcore.agent (see ARCHITECTURE.md)."""
