"""Reuse the warehouse tests' data fixtures (committed excerpt of the published per-turn results)."""

from tests.warehouse.conftest import EXCERPT_CSV, excerpt_db  # noqa: F401
