"""Target work in the warehouse (issue 25): target_evidence's work columns, the strict metrics in the views (equal to
the Python metrics), and an old warehouse file that gains the columns on open.

Rule: a correct turn counts for the target-work rate and Fast_p^Work only when its evidence says the target path
carried the work; the paper's target rate is unchanged beside it (a dummy-instruction turn still counts there).
"""

from __future__ import annotations

import duckdb

from ptxcore import metrics as M
from ptxcore.schema import EvaluationStatus as S
from ptxcore.schema import TargetInstruction as T
from ptxcore.schema import TargetWork, TargetWorkShare
from ptxcore.warehouse import Warehouse
from ptxcore.warehouse import queries as Q
from ptxcore.warehouse.ddl import TABLES

from .conftest import full_turn, trajectory

GEMM_FLOPS = 601_295_421_440


def _turn(traj: str, n: int, work: TargetWork | None, speedup: float, status=S.PASSED):
    rec = full_turn(trajectory=traj, turn=n, status=status, speedup=speedup if status is S.PASSED else None,
                    target_instruction=T.EXECUTED)
    share = None if work is None else TargetWorkShare(
        problem_flops=GEMM_FLOPS, problem_min_bytes=274_726_912, threshold=0.5, carries=work,
        target_flops=GEMM_FLOPS if work is TargetWork.CARRIES else 16_384,
        flops_share=1.0 if work is TargetWork.CARRIES else 16_384 / GEMM_FLOPS, reason="r")
    ev = rec.judge.target_instruction.model_copy(update={"work": share})
    return rec.model_copy(update={"judge": rec.judge.model_copy(update={"target_instruction": ev})})


def _case(wh: Warehouse) -> None:
    wh.upsert_trajectories([trajectory(trajectory_id=t, max_turns=4) for t in ("A", "B")])
    wh.upsert_turns([_turn("A", 0, TargetWork.CARRIES, 1.3), _turn("A", 1, TargetWork.DOES_NOT_CARRY, 2.0),
                     _turn("A", 2, None, 1.1), _turn("B", 0, TargetWork.CARRIES, 0.9),
                     _turn("B", 1, TargetWork.DOES_NOT_CARRY, 0.5, status=S.INCORRECT_NUMERICAL)])


def test_evidence_rows_carry_the_work(wh):
    _case(wh)
    _, rows = wh.sql("SELECT trajectory_id, turn, carries, work_share, target_flops, problem_flops FROM target_evidence "
                     "ORDER BY 1, 2")
    assert rows[0] == ("A", 0, "carries", 1.0, GEMM_FLOPS, GEMM_FLOPS)
    assert rows[1][2:5] == ("does_not_carry", 16_384 / GEMM_FLOPS, 16_384)
    assert rows[2][2:] == ("unknown", None, None, None)


def test_strict_metrics_in_sql_equal_python_and_stay_beside_the_paper_ones(wh):
    _case(wh)
    outcomes = Q.turn_outcomes(wh)
    assert [o.target_work for o in outcomes] == [TargetWork.CARRIES, TargetWork.DOES_NOT_CARRY, TargetWork.UNKNOWN,
                                                 TargetWork.CARRIES, TargetWork.DOES_NOT_CARRY]
    sql = {m.k: m for m in Q.turn_metrics_sql(wh)}
    assert list(sql.values()) == M.turn_metrics(outcomes)
    assert sql[4].target_turn_correct_rate == 4 / 8  # the paper's: every correct turn executed a target instruction
    assert sql[4].work_turn_correct_rate == 2 / 8  # strict: only the two that carried the work
    assert (sql[4].best_speedup, sql[4].target_best_speedup, sql[4].work_best_speedup) == (2.0, 2.0, 1.3)
    assert sql[4].work_evidence_turns == 4 and sql[1].work_evidence_turns == 2
    pts = {p.p: p for p in Q.fast_p_sql(wh)}
    assert (pts[1.0].fast_p, pts[1.0].fast_p_inst, pts[1.0].fast_p_work) == (3 / 8, 3 / 8, 1 / 8)
    assert Q.fast_p_sql(wh) == M.fast_p_curves(outcomes)
    band = next(b for b in Q.fast_p_bands_sql(wh) if b.p == 1.0)
    assert band.fast_p_work_mean == band.fast_p_work_max == 1 / 8
    spread = Q.variant_spread_sql(wh)
    assert [s.work_turn_correct_rate_max for s in spread] == [s.work_turn_correct_rate_max for s in M.variant_spread(
        M.turn_metrics(outcomes, by_variant=True))]


def test_the_arbitration_outcome_is_a_column(wh):
    from ptxcore.schema import Arbitration, ArbitrationOutcome

    rec = full_turn()
    arb = Arbitration(outcome=ArbitrationOutcome.KERNEL_EXACT, atol=0.01, rtol=0.01, inexact=["library"])
    judge = rec.judge.model_copy(update={"correctness": rec.judge.correctness.model_copy(update={"arbitrations": [arb]})})
    wh.upsert_turns([rec.model_copy(update={"judge": judge})])
    assert wh.sql("SELECT arbitration FROM evaluations")[1] == [("kernel_exact",)]
    assert wh.turns("c1")[0].judge.correctness.arbitrations == [arb]


def test_an_old_warehouse_file_gains_the_work_columns(tmp_path):
    path = tmp_path / "old.duckdb"
    con = duckdb.connect(str(path))
    for name, ddl in TABLES.items():
        if name == "target_evidence":
            ddl = ddl.split("carries VARCHAR")[0] + "PRIMARY KEY (campaign_id, trajectory_id, turn))"
        if name == "evaluations":
            ddl = ddl.replace("arbitration VARCHAR,", "")
        con.execute(ddl)
    con.close()
    with Warehouse(path) as wh:
        wh.upsert_turns([_turn("A", 0, TargetWork.CARRIES, 1.3)])
        assert wh.sql("SELECT carries FROM target_evidence")[1] == [("carries",)]
        assert wh.sql("SELECT value FROM warehouse_meta WHERE key = 'schema_version'")[1] == [("3",)]
