"""Warehouse: round-trips, idempotent upserts, resume keys, read-only and single-writer behaviour."""

from __future__ import annotations

import pyarrow.parquet as pq
import pytest

from ptxcore.schema import EnvironmentInfo, EvaluationStatus, StopReason, TargetInstruction
from ptxcore.warehouse import TABLES, Warehouse, WarehouseError, WarehouseLockedError

from .conftest import KERNEL, campaign, full_turn, trajectory


def test_full_turn_round_trips_equal(wh):
    rec = full_turn()
    assert wh.upsert_turns([rec]) == 1
    (back,) = wh.turns("c1")
    assert back == rec
    assert back.judge.target_instruction.raw_rows == [{"opcode": "HGMMA.64x128x16", "count": 4096}]


def test_minimal_turn_round_trips_equal(wh):
    rec = full_turn(kernel_sha256=None, kernel_text=None, compile=None, judge=None,
                    environment=EnvironmentInfo(), status=EvaluationStatus.EXTRACTION_ERROR,
                    target_instruction=TargetInstruction.UNKNOWN, speedup=None)
    wh.upsert_turns([rec])
    assert wh.turns("c1") == [rec]


def test_upsert_is_idempotent_and_last_write_wins(wh):
    first = full_turn(feedback="first")
    wh.upsert_turns([first])
    wh.upsert_turns([first])
    second = full_turn(feedback="second", judge=None)
    assert wh.upsert_turns([first, second]) == 1  # same key twice in one batch: last wins
    assert wh.turns("c1") == [second]
    _, rows = wh.sql("SELECT count(*) FROM turns")
    assert rows == [(1,)]
    _, rows = wh.sql("SELECT count(*) FROM evaluations")  # the judge row went with the old record
    assert rows == [(0,)]


def test_kernel_text_is_stored_once(wh):
    wh.upsert_turns([full_turn(turn=i) for i in range(4)] + [full_turn(trajectory="t1")])
    _, rows = wh.sql("SELECT count(*), sum(n_bytes) FROM kernels")
    assert rows == [(1, len(KERNEL.encode()))]
    _, rows = wh.sql("SELECT count(*) FROM environments")
    assert rows == [(1,)]  # turn and judge share one environment


def test_recorded_turn_keys_and_filters(wh):
    wh.upsert_turns([full_turn(trajectory=t, turn=i) for t in ("a", "b") for i in range(3)])
    wh.upsert_turns([full_turn(campaign="other")])
    assert wh.recorded_turn_keys("c1") == {("c1", t, i) for t in ("a", "b") for i in range(3)}
    assert [r.turn for r in wh.turns("c1", "b")] == [0, 1, 2]
    assert wh.recorded_turn_keys("nope") == set()


def test_campaign_and_trajectory_round_trip(wh):
    wh.upsert_campaign(campaign())
    t = trajectory(num_turns=3, stop_reason=StopReason.TARGET_REACHED, best_speedup=1.25)
    wh.upsert_trajectory(t)
    wh.upsert_trajectory(t)
    assert wh.trajectories("c1") == [t]
    assert wh.campaign("c1") == campaign()
    assert wh.campaigns() == [campaign()]
    assert wh.campaign("missing") is None
    back = wh.campaign("c1")
    assert back.git_commit is None and back.ptxbench_version is None and back.created_at is None
    assert wh.trajectories("c1")[0].started_at is None and wh.trajectories("c1")[0].finished_at is None


def test_campaign_rows_stored_with_empty_strings_read_as_unknown(wh):
    """Warehouses written before these fields were optional hold "" for an unknown commit, version or time."""
    old = {**campaign().model_dump(mode="json"), "git_commit": "", "ptxbench_version": "", "created_at": "",
           "config_sha256": ""}
    wh.upsert_rows("campaigns", [old])
    wh.upsert_rows("trajectories", [{**trajectory().model_dump(mode="json"), "started_at": "", "finished_at": ""}])
    back = wh.campaign("c1")
    assert (back.git_commit, back.ptxbench_version, back.created_at, back.config_sha256) == (None, None, None, None)
    (t,) = wh.trajectories("c1")
    assert (t.started_at, t.finished_at) == (None, None)
    kept = {**old, "git_commit": "cbc38f0", "created_at": "2026-12-01T09:40:00+00:00"}
    wh.upsert_rows("campaigns", [kept])
    assert wh.campaign("c1").git_commit == "cbc38f0" and wh.campaign("c1").created_at == kept["created_at"]


def test_reference_latency_cache(wh):
    assert wh.reference_latency("gemm", "w", "NVIDIA H200", "580") is None
    wh.upsert_reference_latency("gemm", "w", "NVIDIA H200", "580", 0.82, "2026-01-01")
    wh.upsert_reference_latency("gemm", "w", "NVIDIA H200", "580", 0.80, "2026-01-02")
    wh.upsert_reference_latency("gemm", "w", "NVIDIA H100", "580", 1.1, "2026-01-02")
    assert wh.reference_latency("gemm", "w", "NVIDIA H200", "580") == 0.80
    assert wh.reference_latency("gemm", "w", "NVIDIA H100", "580") == 1.1


def test_evaluation_is_flattened(wh):
    wh.upsert_turns([full_turn()])
    cols, rows = wh.sql("SELECT status, latency_ms, reference_latency_ms, max_registers, total_spill_bytes, "
                        "sanitizer_ran, total_stage_s, target_instruction FROM evaluations")
    assert rows == [("PASSED", 0.9, 0.82, 168, 12, 1, 4.75, "executed")]
    _, rows = wh.sql("SELECT status, n_raw_rows, tool FROM target_evidence")
    assert rows == [("executed", 1, "ncu 2025.3.1")]


def test_sql_errors_are_one_line(wh):
    with pytest.raises(WarehouseError, match="no_such_table"):
        wh.sql("SELECT * FROM no_such_table")


def test_export_parquet_writes_every_table(wh, tmp_path):
    wh.upsert_turns([full_turn()])
    paths = wh.export_parquet(tmp_path / "pq")
    assert sorted(p.stem for p in paths) == sorted(n for n in TABLES if n != "warehouse_meta")
    turns = pq.read_table(tmp_path / "pq" / "turns.parquet")
    assert turns.num_rows == 1 and turns.column("status").to_pylist() == ["PASSED"]


def test_read_only_refuses_writes_and_missing_file(tmp_path):
    path = tmp_path / "w.duckdb"
    with pytest.raises(WarehouseError, match="no warehouse"):
        Warehouse(path, read_only=True)
    with Warehouse(path) as w:
        w.upsert_turns([full_turn()])
    with Warehouse(path, read_only=True) as ro:
        assert len(ro.turns("c1")) == 1
        with pytest.raises(WarehouseError, match="read-only"):
            ro.upsert_turns([full_turn(turn=1)])


def test_second_writer_process_is_refused(tmp_path):
    import subprocess
    import sys

    path = tmp_path / "w.duckdb"
    with Warehouse(path):
        code = ("import sys\nfrom ptxcore.warehouse import Warehouse, WarehouseLockedError\n"
                f"try:\n    Warehouse({str(path)!r})\nexcept WarehouseLockedError as e:\n"
                "    print('locked:', e); sys.exit(3)\n")
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 3, out.stderr
    assert "in use by another writer" in out.stdout
    assert WarehouseLockedError.__mro__[1] is WarehouseError
