"""The paper's metrics (Section 4.1) as pure Python over `TurnOutcome`s; no duckdb here.

The warehouse's views compute the same numbers in SQL (see ptxcore.warehouse.views).
"""

from .fastp import FastPBand, FastPPoint, fast_p_bands, fast_p_curves
from .turns import (
    FAST_P_GRID,
    TURN_LIMITS,
    TurnMetrics,
    TurnOutcome,
    VariantSpread,
    metrics_at,
    turn_metrics,
    variant_spread,
)

__all__ = [
    "FAST_P_GRID", "TURN_LIMITS", "FastPBand", "FastPPoint", "TurnMetrics", "TurnOutcome", "VariantSpread",
    "fast_p_bands", "fast_p_curves", "metrics_at", "turn_metrics", "variant_spread",
]
