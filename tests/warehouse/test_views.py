"""The SQL views equal the Python metrics: on the hand-built case, on the committed excerpt and (where
present) on all 13,674 published turns."""

from __future__ import annotations

import pytest

from ptxcore import metrics as M
from ptxcore.schema import EvaluationStatus as S
from ptxcore.schema import RecordedVerdict
from ptxcore.schema import TargetInstruction as T
from ptxcore.warehouse import Warehouse
from ptxcore.warehouse import queries as Q

from .conftest import full_turn, trajectory


def _hand_case(wh: Warehouse) -> None:
    """Same case as tests/metrics/test_turns.py, written through the warehouse API (budget 4 turns)."""
    spec = [("A", "p0", 0, S.COMPILE_ERROR, T.UNKNOWN, None), ("A", "p0", 1, S.PASSED, T.EXECUTED, 0.5),
            ("A", "p0", 2, S.PASSED, T.NOT_EXECUTED, 0.9), ("A", "p0", 3, S.PASSED, T.EXECUTED, 1.3),
            ("B", "p1", 0, S.PASSED, T.UNKNOWN, 0.2), ("B", "p1", 1, S.PASSED, T.EXECUTED, 1.25)]
    wh.upsert_trajectories([trajectory(trajectory_id=t, prompt_variant=v, max_turns=4) for t, v in (("A", "p0"), ("B", "p1"))])
    wh.upsert_turns([full_turn(trajectory=t, turn=n, prompt_variant=v, status=s, target_instruction=ti, speedup=sp,
                               judge=None, problem="d", model="m") for t, v, n, s, ti, sp in spec])


def test_views_on_hand_case(wh):
    _hand_case(wh)
    rows = {r["k"]: r for r in Q.turn_metrics_json(wh)}
    assert sorted(rows) == [1, 4, 8]
    assert (rows[1]["turn_correct_rate"], rows[1]["best_speedup"], rows[1]["target_best_speedup"]) == (0.5, 0.2, None)
    assert (rows[4]["turn_correct_rate"], rows[4]["target_turn_correct_rate"]) == (0.625, 0.375)
    # budget 4: k = 8 counts the whole budget, so it equals k = 4 (2 trajectories x 4 turns in the denominator)
    assert (rows[8]["turn_correct_rate"], rows[8]["target_turn_correct_rate"], rows[8]["turns_counted"]) == (
        0.625, 0.375, 4)
    outcomes = Q.turn_outcomes(wh)
    assert Q.turn_metrics_sql(wh) == M.turn_metrics(outcomes)
    assert Q.turn_metrics_sql(wh, by_variant=True) == M.turn_metrics(outcomes, by_variant=True)
    pts = {(p.prompt_variant, p.p): p for p in Q.fast_p_sql(wh)}
    assert (pts[("p0", 0.5)].fast_p, pts[("p0", 0.5)].fast_p_inst) == (0.5, 0.25)
    assert (pts[("p1", 0.0)].fast_p, pts[("p1", 0.0)].n_turns) == (0.5, 4)


def test_max_turns_falls_back_to_longest_recorded_trajectory(wh):
    wh.upsert_turns([full_turn(trajectory="solo", turn=n) for n in range(3)])  # no trajectory row
    (o,) = {x.max_turns for x in Q.turn_outcomes(wh)}
    assert o == 3


def _assert_sql_equals_python(path) -> int:
    with Warehouse(path, read_only=True) as wh:
        outcomes = Q.turn_outcomes(wh)
        assert Q.turn_metrics_sql(wh) == M.turn_metrics(outcomes)
        by_var = M.turn_metrics(outcomes, by_variant=True)
        assert Q.turn_metrics_sql(wh, by_variant=True) == by_var
        spread_sql, spread_py = Q.variant_spread_sql(wh), M.variant_spread(by_var)
        assert [s.model_dump(exclude={"turn_correct_rate_mean", "target_turn_correct_rate_mean"}) for s in spread_sql] == \
            [s.model_dump(exclude={"turn_correct_rate_mean", "target_turn_correct_rate_mean"}) for s in spread_py]
        for a, b in zip(spread_sql, spread_py, strict=True):  # means: summation order may differ in the last bit
            assert a.turn_correct_rate_mean == pytest.approx(b.turn_correct_rate_mean, rel=1e-12, abs=1e-15)
        curves = M.fast_p_curves(outcomes)
        assert Q.fast_p_sql(wh) == curves
        bands_sql, bands_py = Q.fast_p_bands_sql(wh), M.fast_p_bands(curves)
        assert len(bands_sql) == len(bands_py)
        for a, b in zip(bands_sql, bands_py, strict=True):
            assert (a.run, a.definition, a.p, a.fast_p_min, a.fast_p_max) == (b.run, b.definition, b.p, b.fast_p_min, b.fast_p_max)
            assert a.fast_p_inst_mean == pytest.approx(b.fast_p_inst_mean, rel=1e-12, abs=1e-15)
        return len(outcomes)


def test_sql_equals_python_on_excerpt(excerpt_db):
    assert _assert_sql_equals_python(excerpt_db) == 1023


@pytest.mark.slow
def test_sql_equals_python_on_full_published_data(full_db):
    assert _assert_sql_equals_python(full_db) == 13674


def _recorded(driver: str | None = "580.159.04") -> RecordedVerdict:
    return RecordedVerdict(source="campaigns/recorded/h200", trace_sha256="ef" * 32, gpu_name="NVIDIA H200",
                           driver_version=driver, judged_at="2026-12-01T11:50:45+00:00")


def test_recorded_verdicts_are_named_in_the_outcomes_and_the_metrics(wh):
    """The view builds the same "GPU, driver, date" as the schema; a measured verdict has none."""
    measured = full_turn(trajectory="m")
    reused = [full_turn(trajectory=f"r{i}", judge=measured.judge.model_copy(update={"recorded": rec}))
              for i, rec in enumerate((_recorded(), _recorded(driver=None)))]
    wh.upsert_turns([measured, *reused])
    got = {o.trajectory_id: o.recorded_from for o in Q.turn_outcomes(wh)}
    assert got == {"m": None, "r0": _recorded().label, "r1": _recorded(driver=None).label}
    assert got["r1"] == "NVIDIA H200, 2026-12-01"
    rows = {r["k"]: r for r in Q.turn_metrics_json(wh)}
    assert rows[1]["recorded_turns"] == 2
    assert rows[1]["recorded_from"] == "; ".join(sorted([_recorded().label, _recorded(driver=None).label]))
    assert Q.turn_metrics_sql(wh) == M.turn_metrics(Q.turn_outcomes(wh))


def test_a_read_only_reader_uses_this_versions_views(tmp_path):
    """A warehouse whose stored views are older (here: a view dropped and replaced by a stale one) is read with the
    current definitions: read-only connections create them as TEMP views."""
    import duckdb

    path = tmp_path / "old.duckdb"
    with Warehouse(path) as wh:
        wh.upsert_turns([full_turn()])
    con = duckdb.connect(str(path))
    con.execute("CREATE OR REPLACE VIEW v_turn_metrics AS SELECT 'stale' AS run")
    con.close()
    with Warehouse(path, read_only=True) as wh:
        assert {r["run"] for r in Q.turn_metrics_json(wh)} == {"c1"}
