"""Prefect flows and the `ptxbench` command line (the top layer: flows -> tasks -> ptxcore)."""
