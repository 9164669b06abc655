"""Post-hoc invalidation (`ptxbench warehouse invalidate`): bad requests first (one line, nothing written),
then the views' numbers change while every raw row and the whole history stay."""

from __future__ import annotations

import json

import duckdb
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from flows.cli.main import app
from ptxcore import metrics as M
from ptxcore.schema import EvaluationStatus as S
from ptxcore.schema import TargetInstruction as T
from ptxcore.warehouse import Warehouse
from ptxcore.warehouse import queries as Q

from .conftest import full_turn, trajectory

runner = CliRunner()
KERNEL_B1 = "// kernel of B turn 1 (a hack found later)\n"


def _hand_case(path) -> None:
    """tests/warehouse/test_views.py's case (budget 4 turns); B's turn 1 (the best speedup) has its own kernel,
    which campaign c2 reuses."""
    spec = [("A", "p0", 0, S.COMPILE_ERROR, T.UNKNOWN, None), ("A", "p0", 1, S.PASSED, T.EXECUTED, 0.5),
            ("A", "p0", 2, S.PASSED, T.NOT_EXECUTED, 0.9), ("A", "p0", 3, S.PASSED, T.EXECUTED, 1.3),
            ("B", "p1", 0, S.PASSED, T.UNKNOWN, 0.2), ("B", "p1", 1, S.PASSED, T.EXECUTED, 1.25)]
    with Warehouse(path) as wh:
        wh.upsert_trajectories([trajectory(trajectory_id=t, prompt_variant=v, max_turns=4)
                                for t, v in (("A", "p0"), ("B", "p1"))])
        wh.upsert_turns([full_turn(trajectory=t, turn=n, prompt_variant=v, status=s, target_instruction=ti, speedup=sp,
                                   judge=None, problem="d", model="m",
                                   **({"kernel_text": KERNEL_B1, "kernel_sha256": sha(KERNEL_B1)} if (t, n) == ("B", 1)
                                      else {"kernel_text": f"// {t}{n}\n", "kernel_sha256": sha(f"// {t}{n}\n")}))
                         for t, v, n, s, ti, sp in spec])
        wh.upsert_turns([full_turn(campaign="c2", trajectory="Z", turn=0, kernel_text=KERNEL_B1,
                                   kernel_sha256=sha(KERNEL_B1), problem="d", model="m")])


def sha(text: str) -> str:
    from ptxcore.schema import text_sha256

    return text_sha256(text)


@pytest.fixture
def db(tmp_path):
    path = tmp_path / "w.duckdb"
    _hand_case(path)
    return path


def cli(*args):
    return runner.invoke(app, list(args))


def inv(db, *args):
    return cli("warehouse", "invalidate", "--db", str(db), *args)


def one_line_error(r) -> str:
    assert r.exit_code == 2, r.output
    assert "Traceback" not in r.output
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), r.stderr
    return lines[0]


def events(db) -> list[dict]:
    with Warehouse(db, read_only=True) as wh:
        return wh.invalidation_events()


def metrics(db) -> dict:
    with Warehouse(db, read_only=True) as wh:
        return {(r["run"], r["k"]): r for r in Q.turn_metrics_json(wh)}


BAD = [
    (["--turn", "c1/B", "--reason", "x"], "expected CAMPAIGN/TRAJECTORY/TURN"),
    (["--turn", "c1/B/one", "--reason", "x"], "expected CAMPAIGN/TRAJECTORY/TURN"),
    (["--turn", "../../etc", "--reason", "x"], "expected CAMPAIGN/TRAJECTORY/TURN"),
    (["--turn", "../x/0", "--reason", "x"], "no turn ../x/0 in"),
    (["--turn", "c1/B/7", "--reason", "x"], "no turn c1/B/7 in"),
    (["--turn", "nope/B/1", "--reason", "x"], "no turn nope/B/1 in"),
    (["--kernel", "zz", "--reason", "x"], "expected a sha256"),
    (["--kernel", "ab" * 32, "--reason", "x"], f"no kernel {'ab' * 32} in"),
    (["--turn", "c1/B/1", "--reason", "   "], "a non-empty reason is required"),
    (["--turn", "c1/B/1", "--reason", "two\nlines"], "control characters"),
    (["--turn", "c1/B/1", "--reason", "x" * 2001], "at most 2000 characters"),
    (["--reason", "x"], "give at least one --turn or --kernel"),
    (["--turn", "c1/B/1", "--turn", "c1/B/9", "--reason", "x"], "no turn c1/B/9"),  # all or nothing
    (["--turn", "c1/B/1", "--reason", "x", "--revoke"], "is not invalidated: nothing to revoke"),
]


@pytest.mark.parametrize(("args", "needle"), BAD, ids=[" ".join(a)[:40] for a, _ in BAD])
def test_bad_requests_are_one_line_and_write_nothing(db, args, needle):
    before = metrics(db)
    assert needle in one_line_error(inv(db, *args))
    assert events(db) == [] and metrics(db) == before


def test_a_missing_warehouse_is_not_created(tmp_path):
    path = tmp_path / "none.duckdb"
    assert "no warehouse at" in one_line_error(inv(path, "--turn", "c1/B/1", "--reason", "x"))
    assert not path.exists()


def test_invalidating_a_turn_changes_the_views_and_keeps_the_rows(db):
    before = metrics(db)
    assert (before[("c1", 4)]["turn_correct_rate"], before[("c1", 4)]["target_turn_correct_rate"]) == (0.625, 0.375)
    r = inv(db, "--turn", "c1/B/1", "--reason", "writes the output in a side stream", "--by", "auditor")
    assert r.exit_code == 0, r.output
    assert "invalidated turn c1/B/1: 1 turns affected" in r.stdout
    after = metrics(db)
    assert (after[("c1", 4)]["turn_correct_rate"], after[("c1", 4)]["target_turn_correct_rate"]) == (0.5, 0.25)
    assert after[("c1", 4)]["n_trajectories"] == 2  # the trajectory keeps its budget: as if the turn was unplayed
    assert after[("c1", 8)]["best_speedup"] == 1.3 and after[("c2", 1)] == before[("c2", 1)]
    with Warehouse(db, read_only=True) as wh:
        assert wh.sql("SELECT count(*) FROM turns")[1][0][0] == 7  # raw rows stay
        assert wh.sql("SELECT status, speedup FROM turns WHERE trajectory_id = 'B' AND turn = 1")[1] == [("PASSED", 1.25)]
        assert wh.invalid_turns() == {("c1", "B", 1): "writes the output in a side stream"}
        outcomes = Q.turn_outcomes(wh)
        assert ("B", 1) not in {(o.trajectory_id, o.turn) for o in outcomes}
        assert Q.turn_metrics_sql(wh) == M.turn_metrics(outcomes)  # views and Python metrics still agree
        assert Q.fast_p_sql(wh) == M.fast_p_curves(outcomes)
    (event,) = events(db)
    assert (event["action"], event["target"], event["actor"], event["turn"]) == ("invalidate", "turn", "auditor", 1)
    assert event["event_at"].endswith("+00:00")


def test_a_kernel_covers_every_turn_with_it_and_revoke_restores_with_history(db):
    before = metrics(db)
    r = inv(db, "--kernel", sha(KERNEL_B1).upper(), "--reason", "timer patched")
    assert r.exit_code == 0 and "2 turns affected" in r.stdout, r.output
    with Warehouse(db, read_only=True) as wh:
        assert set(wh.invalid_turns()) == {("c1", "B", 1), ("c2", "Z", 0)}
    assert "already invalidated" in one_line_error(inv(db, "--kernel", sha(KERNEL_B1), "--reason", "again"))
    r = inv(db, "--kernel", sha(KERNEL_B1), "--reason", "false alarm: the stream was joined", "--revoke")
    assert r.exit_code == 0 and "revoked the invalidation of kernel" in r.stdout, r.output
    assert metrics(db) == before
    assert [(e["action"], e["seq"]) for e in events(db)] == [("invalidate", 0), ("revoke", 1)]  # history kept


def test_turn_and_kernel_invalidations_are_independent(db):
    assert inv(db, "--turn", "c1/B/1", "--kernel", sha(KERNEL_B1), "--reason", "both").exit_code == 0
    assert inv(db, "--kernel", sha(KERNEL_B1), "--reason", "kernel ok", "--revoke").exit_code == 0
    with Warehouse(db, read_only=True) as wh:
        assert set(wh.invalid_turns()) == {("c1", "B", 1)}  # still invalid by its own event


def test_reports_and_sql_see_the_invalidation(db, tmp_path):
    inv(db, "--turn", "c1/B/1", "--reason", "hack")
    rows = json.loads(cli("report", "turn-metrics", "--db", str(db), "--json", "--run", "c1").stdout)
    assert {r["k"]: r["turn_correct_rate"] for r in rows}[4] == 0.5
    r = cli("sql", "SELECT campaign_id, trajectory_id, turn, reason FROM v_invalid_turns", "--db", str(db),
            "--format", "json")
    assert json.loads(r.stdout) == [{"campaign_id": "c1", "trajectory_id": "B", "turn": 1, "reason": "hack"}]
    r = cli("report", "c1", "--db", str(db), "--out", str(tmp_path / "rep"))
    assert r.exit_code == 0, r.output
    assert "5 turns" in (tmp_path / "rep" / "report.md").read_text()  # 6 recorded, 1 invalidated
    assert cli("warehouse", "export", "--db", str(db), "--out", str(tmp_path / "pq")).exit_code == 0
    assert pq.read_table(tmp_path / "pq" / "invalidations.parquet").num_rows == 1


def test_a_warehouse_from_before_invalidation_reads_as_having_none(tmp_path):
    path = tmp_path / "old.duckdb"
    con = duckdb.connect(str(path))
    con.execute("CREATE TABLE turns (campaign_id VARCHAR, trajectory_id VARCHAR, turn INTEGER)")
    con.close()
    with Warehouse(path, read_only=True) as wh:
        assert wh.invalid_turns() == {} and wh.invalidation_events() == []


def test_campaign_status_headline_leaves_invalidated_turns_out(db):
    status = ["campaign", "status", "c1", "--warehouse", str(db), "--json"]
    (row,) = json.loads(cli(*status).stdout)["headline"]
    assert (row["model"], row["arch"], row["trajectories"], row["turns"], row["correct"]) == ("m", "hopper", 2, 6, 5)
    inv(db, "--turn", "c1/B/1", "--reason", "hack")
    (row,) = json.loads(cli(*status).stdout)["headline"]
    assert (row["turns"], row["correct"]) == (5, 4)
