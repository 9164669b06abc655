"""Reuse the warehouse tests' data fixtures (committed excerpt of the published per-turn results)."""

from tests.warehouse.conftest import EXCERPT_CSV, excerpt_db, full_db, full_turn, trajectory  # noqa: F401
