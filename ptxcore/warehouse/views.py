"""The paper's metrics as DuckDB views. Same definitions as `ptxcore.metrics` (see its docstrings);
tests/warehouse/test_views_match_python.py proves both give identical numbers on the published data.

Views:
- v_current_invalidations    the invalidations in force (latest event per target is `invalidate`)
- v_invalid_turns            turns currently invalidated (by turn or by kernel), with reason, actor, time
- v_turn_outcomes            one row per valid turn (invalidated turns left out, see invalidation.py): run, model, arch, definition, prompt_variant,
                             trajectory_id, turn, status, target_instruction, speedup, reasoning_tokens,
                             max_turns, target_work (carries | does_not_carry | unknown, from target_evidence),
                             correct, target_correct, work_correct, recorded_from (where a reused verdict was
                             measured: "GPU, driver, date"; NULL for a verdict the run reached)
- v_turn_metrics             per (run, model, arch, definition, k): the turn-metrics JSON's columns (k beyond the
                             turn budget counts the whole budget: turns_counted = min(k, budget)), then the
                             target-work rate, work best speedup and work_evidence_turns (issue 25)
- v_turn_metrics_by_variant  the same per prompt variant
- v_turn_metrics_variant_spread  mean / min / max across variants of the per-variant rates
- v_fast_p                   Fast_p, Fast_p^Inst and Fast_p^Work per (run, model, arch, definition, variant, p)
- v_fast_p_bands             mean / min / max across variants of v_fast_p
- v_env_returns              per environment episode: steps, total and discounted return (env_ddl.py)
"""

from __future__ import annotations

import logging
from typing import Any

import duckdb

from ptxcore.metrics import FAST_P_GRID, TURN_LIMITS

from .env_ddl import V_ENV_RETURNS
from .invalidation import V_CURRENT_INVALIDATIONS, V_INVALID_TURNS, VALID_TURN_FILTER

log = logging.getLogger(__name__)

_P_STEPS = 100
"""FAST_P_GRID is i / 100 for i in 0..300; the SQL grid is built the same way (same doubles)."""
assert FAST_P_GRID == tuple(i / _P_STEPS for i in range(len(FAST_P_GRID)))

V_TURN_OUTCOMES = """
CREATE OR REPLACE VIEW v_turn_outcomes AS
SELECT t.campaign_id AS run, t.model, t.arch, t.problem AS definition, t.prompt_variant,
       t.trajectory_id, t.turn, t.status, t.target_instruction, t.speedup,
       COALESCE(t.reasoning_tokens, 0) AS reasoning_tokens,
       COALESCE(tr.max_turns, t.n_recorded) AS max_turns,
       COALESCE(te.carries, 'unknown') AS target_work,
       t.status = 'PASSED' AS correct,
       t.status = 'PASSED' AND t.target_instruction = 'executed' AS target_correct,
       t.status = 'PASSED' AND COALESCE(te.carries, 'unknown') = 'carries' AS work_correct,
       CASE WHEN json_extract_string(e.raw_json, '$.recorded.source') IS NOT NULL THEN concat_ws(', ',
           NULLIF(json_extract_string(e.raw_json, '$.recorded.gpu_name'), ''),
           'driver ' || NULLIF(json_extract_string(e.raw_json, '$.recorded.driver_version'), ''),
           NULLIF(left(json_extract_string(e.raw_json, '$.recorded.judged_at'), 10), '')) END AS recorded_from
FROM (SELECT *, max(turn) OVER (PARTITION BY campaign_id, trajectory_id) + 1 AS n_recorded FROM turns) t
LEFT JOIN trajectories tr USING (campaign_id, trajectory_id)
LEFT JOIN evaluations e USING (campaign_id, trajectory_id, turn)
LEFT JOIN target_evidence te USING (campaign_id, trajectory_id, turn)
WHERE """ + VALID_TURN_FILTER
"""`recorded_from` is ptxcore.schema.recorded_label of the judge's `recorded` (NULL for a verdict the run reached)."""

_METRICS_SELECT = """
SELECT run, model, arch, definition, {variant} ks.k AS k,
       count(DISTINCT trajectory_id) AS n_trajectories,
       (count(*) FILTER (WHERE turn < ks.k AND correct))::DOUBLE
           / (count(DISTINCT trajectory_id) * least(ks.k, max(max_turns)))::DOUBLE AS turn_correct_rate,
       (count(*) FILTER (WHERE turn < ks.k AND target_correct))::DOUBLE
           / (count(DISTINCT trajectory_id) * least(ks.k, max(max_turns)))::DOUBLE AS target_turn_correct_rate,
       max(speedup) FILTER (WHERE turn < ks.k AND correct) AS best_speedup,
       max(speedup) FILTER (WHERE turn < ks.k AND target_correct) AS target_best_speedup,
       least(ks.k, max(max_turns))::INTEGER AS turns_counted,
       count(recorded_from) FILTER (WHERE turn < ks.k) AS recorded_turns,
       string_agg(DISTINCT recorded_from, '; ' ORDER BY recorded_from) FILTER (WHERE turn < ks.k) AS recorded_from,
       (count(*) FILTER (WHERE turn < ks.k AND work_correct))::DOUBLE
           / (count(DISTINCT trajectory_id) * least(ks.k, max(max_turns)))::DOUBLE AS work_turn_correct_rate,
       max(speedup) FILTER (WHERE turn < ks.k AND work_correct) AS work_best_speedup,
       count(*) FILTER (WHERE turn < ks.k AND target_work <> 'unknown') AS work_evidence_turns
FROM v_turn_outcomes CROSS JOIN (SELECT unnest({ks}) AS k) ks
GROUP BY run, model, arch, definition, {variant} ks.k
"""

V_TURN_METRICS = "CREATE OR REPLACE VIEW v_turn_metrics AS" + _METRICS_SELECT.format(
    variant="", ks=list(TURN_LIMITS))
V_TURN_METRICS_BY_VARIANT = "CREATE OR REPLACE VIEW v_turn_metrics_by_variant AS" + _METRICS_SELECT.format(
    variant="prompt_variant,", ks=list(TURN_LIMITS))

V_VARIANT_SPREAD = """
CREATE OR REPLACE VIEW v_turn_metrics_variant_spread AS
SELECT run, model, arch, definition, k, count(*) AS n_variants,
       avg(turn_correct_rate) AS turn_correct_rate_mean,
       min(turn_correct_rate) AS turn_correct_rate_min, max(turn_correct_rate) AS turn_correct_rate_max,
       avg(target_turn_correct_rate) AS target_turn_correct_rate_mean,
       min(target_turn_correct_rate) AS target_turn_correct_rate_min,
       max(target_turn_correct_rate) AS target_turn_correct_rate_max,
       avg(work_turn_correct_rate) AS work_turn_correct_rate_mean,
       min(work_turn_correct_rate) AS work_turn_correct_rate_min,
       max(work_turn_correct_rate) AS work_turn_correct_rate_max
FROM v_turn_metrics_by_variant
GROUP BY run, model, arch, definition, k
"""

V_FAST_P = f"""
CREATE OR REPLACE VIEW v_fast_p AS
WITH g AS (
    SELECT run, model, arch, definition, prompt_variant,
           count(DISTINCT trajectory_id) AS n_trajectories, max(max_turns) AS n_turns
    FROM v_turn_outcomes GROUP BY ALL
), c AS (
    SELECT o.run, o.model, o.arch, o.definition, o.prompt_variant, o.speedup, o.target_correct, o.work_correct
    FROM v_turn_outcomes o JOIN g USING (run, model, arch, definition, prompt_variant)
    WHERE o.correct AND o.speedup IS NOT NULL AND o.turn < g.n_turns
), grid AS (
    SELECT i::DOUBLE / {_P_STEPS}::DOUBLE AS p FROM range(0, {len(FAST_P_GRID)}) r(i)
), counts AS (
    SELECT g.run, g.model, g.arch, g.definition, g.prompt_variant, grid.p,
           count(c.speedup) FILTER (WHERE c.speedup > grid.p) AS n_fast,
           count(c.speedup) FILTER (WHERE c.speedup > grid.p AND c.target_correct) AS n_fast_inst,
           count(c.speedup) FILTER (WHERE c.speedup > grid.p AND c.work_correct) AS n_fast_work
    FROM g CROSS JOIN grid
    LEFT JOIN c ON c.run = g.run AND c.model = g.model AND c.arch = g.arch
               AND c.definition = g.definition AND c.prompt_variant = g.prompt_variant
    GROUP BY ALL
)
SELECT counts.run, counts.model, counts.arch, counts.definition, counts.prompt_variant, counts.p,
       g.n_trajectories, g.n_turns,
       n_fast::DOUBLE / (g.n_trajectories * g.n_turns)::DOUBLE AS fast_p,
       n_fast_inst::DOUBLE / (g.n_trajectories * g.n_turns)::DOUBLE AS fast_p_inst,
       n_fast_work::DOUBLE / (g.n_trajectories * g.n_turns)::DOUBLE AS fast_p_work
FROM counts JOIN g USING (run, model, arch, definition, prompt_variant)
"""

V_FAST_P_BANDS = """
CREATE OR REPLACE VIEW v_fast_p_bands AS
SELECT run, model, arch, definition, p, count(*) AS n_variants,
       avg(fast_p) AS fast_p_mean, min(fast_p) AS fast_p_min, max(fast_p) AS fast_p_max,
       avg(fast_p_inst) AS fast_p_inst_mean, min(fast_p_inst) AS fast_p_inst_min,
       max(fast_p_inst) AS fast_p_inst_max,
       avg(fast_p_work) AS fast_p_work_mean, min(fast_p_work) AS fast_p_work_min, max(fast_p_work) AS fast_p_work_max
FROM v_fast_p GROUP BY run, model, arch, definition, p
"""

VIEWS = (V_CURRENT_INVALIDATIONS, V_INVALID_TURNS, V_TURN_OUTCOMES, V_TURN_METRICS, V_TURN_METRICS_BY_VARIANT, V_VARIANT_SPREAD, V_FAST_P, V_FAST_P_BANDS)
"""In dependency order."""


def create_views(con: Any, temporary: bool = False) -> None:
    """(Re)create every metric view on a DuckDB connection; `temporary`: as TEMP views of this connection only
    (a read-only connection, whose file may hold the views of an older version), which shadow the stored ones."""
    has_env = con.execute("SELECT count(*) FROM information_schema.tables WHERE table_name = 'env_steps'").fetchone()[0]
    for ddl in (*VIEWS, V_ENV_RETURNS) if has_env else VIEWS:  # a file older than the environment lacks env_steps
        con.execute(ddl.replace("CREATE OR REPLACE VIEW", "CREATE OR REPLACE TEMP VIEW", 1) if temporary else ddl)


def current_views(con: Any) -> bool:
    """On a read-only connection: this version's views as TEMP views, so that reading an older warehouse never
    uses older metric definitions. A file too old for them (a table missing) keeps its own; returns which."""
    try:
        create_views(con, temporary=True)
    except duckdb.Error as exc:
        log.warning("metric views of this version do not apply to this warehouse (%s); using its stored views",
                    str(exc).splitlines()[0])
        return False
    return True
