"""research: kernel models and precision studies behind the solution library (not part of the product).

Nothing in ptxcore, tasks or flows imports this package (an import-linter contract in pyproject.toml
says so); tests and device batches may. Run its scripts from the repository root, e.g.
`python -m research.precision.bwd_study`. See research/README.md.
"""
