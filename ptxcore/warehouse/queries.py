"""Read the metric views into `ptxcore.metrics` objects (what the report and the CLI consume)."""

from __future__ import annotations

import fnmatch
from collections.abc import Sequence
from typing import Any

from ptxcore.metrics import FastPBand, FastPPoint, TurnMetrics, TurnOutcome, VariantSpread
from ptxcore.schema import EvaluationStatus, TargetInstruction, TargetWork

from .store import Warehouse, WarehouseError

TURN_METRICS_KEYS = (
    "run", "model", "arch", "definition", "k", "n_trajectories", "turn_correct_rate",
    "target_turn_correct_rate", "best_speedup", "target_best_speedup", "turns_counted", "recorded_turns",
    "recorded_from",
)
"""Columns of v_turn_metrics, in the order of the turn-metrics JSON objects."""


def select_runs(wh: Warehouse, patterns: Sequence[str]) -> list[str]:
    """Run ids matching any of the patterns (exact ids or shell globs); error when one matches nothing."""
    _, rows = wh.sql("SELECT DISTINCT campaign_id FROM turns ORDER BY 1")
    known = [r[0] for r in rows]
    chosen: list[str] = []
    for pat in patterns:
        hits = [k for k in known if fnmatch.fnmatchcase(k, pat)]
        if not hits:
            raise WarehouseError(f"no campaign with turns matches {pat!r}")
        chosen.extend(h for h in hits if h not in chosen)
    return chosen


def _where(runs: Sequence[str] | None) -> tuple[str, list[Any]]:
    if runs is None:
        return "", []
    if not runs:
        return "WHERE false", []
    return f"WHERE run IN ({', '.join('?' for _ in runs)})", list(runs)


def _rows(wh: Warehouse, view: str, order: str, runs: Sequence[str] | None) -> list[dict[str, Any]]:
    where, params = _where(runs)
    cols, rows = wh.sql(f"SELECT * FROM {view} {where} ORDER BY {order}", params)
    return [dict(zip(cols, r, strict=True)) for r in rows]


def turn_outcomes(wh: Warehouse, runs: Sequence[str] | None = None) -> list[TurnOutcome]:
    """Every recorded turn (of the given runs) as a TurnOutcome."""
    out = []
    for r in _rows(wh, "v_turn_outcomes", "run, trajectory_id, turn", runs):
        out.append(TurnOutcome(
            run=r["run"], model=r["model"], arch=r["arch"], definition=r["definition"],
            prompt_variant=r["prompt_variant"], trajectory_id=r["trajectory_id"], turn=r["turn"],
            status=EvaluationStatus(r["status"]), target_instruction=TargetInstruction(r["target_instruction"]),
            speedup=r["speedup"], reasoning_tokens=r["reasoning_tokens"], max_turns=r["max_turns"],
            recorded_from=r.get("recorded_from"),  # absent from the views of a warehouse last opened read-only
            target_work=TargetWork(r["target_work"]),
        ))
    return out


def turn_metrics_sql(wh: Warehouse, runs: Sequence[str] | None = None, by_variant: bool = False) -> list[TurnMetrics]:
    """v_turn_metrics (or v_turn_metrics_by_variant) as TurnMetrics, sorted like metrics.turn_metrics."""
    if by_variant:
        rows = _rows(wh, "v_turn_metrics_by_variant", "run, model, arch, definition, prompt_variant, k", runs)
        return [TurnMetrics(**r) for r in rows]
    rows = _rows(wh, "v_turn_metrics", "run, model, arch, definition, k", runs)
    return [TurnMetrics(**r) for r in rows]


def turn_metrics_json(wh: Warehouse, runs: Sequence[str] | None = None) -> list[dict[str, Any]]:
    """The `ptxbench report turn-metrics --json` array, straight from the view."""
    rows = _rows(wh, "v_turn_metrics", "run, model, arch, definition, k", runs)
    return [{k: r[k] for k in TURN_METRICS_KEYS} for r in rows]


def variant_spread_sql(wh: Warehouse, runs: Sequence[str] | None = None) -> list[VariantSpread]:
    rows = _rows(wh, "v_turn_metrics_variant_spread", "run, model, arch, definition, k", runs)
    return [VariantSpread(**r) for r in rows]


def fast_p_sql(wh: Warehouse, runs: Sequence[str] | None = None) -> list[FastPPoint]:
    rows = _rows(wh, "v_fast_p", "run, model, arch, definition, prompt_variant, p", runs)
    return [FastPPoint(**r) for r in rows]


def fast_p_bands_sql(wh: Warehouse, runs: Sequence[str] | None = None) -> list[FastPBand]:
    rows = _rows(wh, "v_fast_p_bands", "run, model, arch, definition, p", runs)
    return [FastPBand(**r) for r in rows]
