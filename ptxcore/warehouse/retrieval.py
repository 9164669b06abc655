"""Repair-retrieval reads of the warehouse: the condition each run was played under (Table 4)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

from ptxcore.schema import RetrievalCondition

from .store import Warehouse, WarehouseError


def run_conditions(wh: Warehouse, runs: Sequence[str]) -> dict[str, RetrievalCondition]:
    """Per run, the condition its turns recorded (runs without records are absent); a run that recorded two
    conditions is refused, since its turns cannot be one row of Table 4."""
    if not runs or not wh.has_table("turn_augmentations"):
        return {}
    marks = ", ".join("?" for _ in runs)
    _, rows = wh.sql(f"SELECT DISTINCT campaign_id, condition FROM turn_augmentations WHERE campaign_id IN ({marks})",
                     list(runs))
    found: dict[str, set[str]] = defaultdict(set)
    for run, condition in rows:
        found[run].add(condition)
    out = {}
    for run, conditions in sorted(found.items()):
        if len(conditions) > 1:
            raise WarehouseError(f"run {run} recorded several retrieval conditions: {', '.join(sorted(conditions))}")
        out[run] = RetrievalCondition(conditions.pop())
    return out
