"""Errors of the data engine: one line each, naming the bad input (recipe key, campaign, stage)."""

from __future__ import annotations


class AdaptError(ValueError):
    """A build cannot go on: bad recipe, unknown campaign, empty selection, stage run out of order."""
