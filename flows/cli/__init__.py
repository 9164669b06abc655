"""The `ptxbench` command line."""

from .main import app

__all__ = ["app"]
