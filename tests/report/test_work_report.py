"""The report shows both target metrics (issue 25): the paper's tables unchanged, and, where work shares were
measured, the target-work tables and the Fast_p^Work plot beside them; groups without any work verdict read n/m."""

from __future__ import annotations

from ptxcore.report import build_report
from ptxcore.report.work_tables import NOT_MEASURED, work_tables
from ptxcore.schema import EvaluationStatus as S
from ptxcore.schema import TargetWork
from ptxcore.warehouse import Warehouse
from ptxcore.warehouse import queries as Q
from tests.warehouse.conftest import trajectory
from tests.warehouse.test_work_views import _turn


def _outcomes(tmp_path):
    with Warehouse(tmp_path / "w.duckdb") as wh:
        wh.upsert_trajectories([trajectory(trajectory_id=t, max_turns=4) for t in ("A", "B")])
        wh.upsert_turns([_turn("A", 0, TargetWork.CARRIES, 1.3), _turn("A", 1, TargetWork.DOES_NOT_CARRY, 2.0),
                         _turn("B", 0, TargetWork.CARRIES, 0.9),
                         _turn("B", 1, None, 0.5, status=S.INCORRECT_NUMERICAL)])
        return Q.turn_outcomes(wh)


def test_report_with_work_shares_has_the_strict_tables_and_plot(tmp_path):
    outcomes = _outcomes(tmp_path)
    paths = build_report(outcomes, tmp_path / "rep", "work")
    assert tmp_path / "rep" / "fast_p_work.png" in paths
    md = (tmp_path / "rep" / "report.md").read_text()
    # k = 1: 2 of 2 carried; k = 4: 2 of 8 carried, 3 of 8 executed (the paper's); k = 8 is beyond the 4-turn budget
    # and counts the whole budget, as the paper's tables do (2 and 3 of 8)
    assert "### Target-work turn correctness rate, % (k = 1 / 4 / 8 = all 4 turns) — hopper" in md
    assert "| replay/demo | work 100.0 / 25.0 / 25.0 (target 100.0 / 37.5 / 37.5) |" in md
    assert "| replay/demo | work 1.30 / 1.30 / 1.30 (target 1.30 / 2.00 / 2.00) |" in md
    assert "### Turn correctness rate, % (k = 1 / 4 / 8 = all 4 turns) — hopper" in md  # the paper's table too
    assert "Target-work tables (beyond the paper)" in md


def test_groups_without_work_verdicts_read_not_measured(tmp_path):
    from ptxcore.metrics import turn_metrics

    bare = [o.model_copy(update={"target_work": TargetWork.UNKNOWN}) for o in _outcomes(tmp_path)]
    (table,) = work_tables(turn_metrics(bare))
    assert table.rows == [["replay/demo", NOT_MEASURED]]
    build_report(bare, tmp_path / "rep", "bare")
    assert not (tmp_path / "rep" / "fast_p_work.png").exists()
    assert "Target-work" not in (tmp_path / "rep" / "report.md").read_text()
