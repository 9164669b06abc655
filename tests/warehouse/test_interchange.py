"""FlashInfer-Trace interchange: export a campaign's evaluations, import dataset folders (problems/ too)."""

from __future__ import annotations

import json

import pytest

from ptxcore.problems import get_problem
from ptxcore.schema import EvaluationStatus, JudgeResult, Solution, Trace
from ptxcore.warehouse import Warehouse, WarehouseError
from ptxcore.warehouse.interchange import InterchangeError, export_campaign_traces, import_dataset

from .conftest import KERNEL, full_turn


def _judged(turn: int, status=EvaluationStatus.PASSED, kernel=KERNEL, **over):
    uuid = get_problem("gemm_n7168_k5120").primary_workload.uuid
    rec = full_turn(turn=turn, kernel_text=kernel, status=status, **over)
    perf = rec.judge.performance if status is EvaluationStatus.PASSED else None  # only PASSED carries timing
    judge = JudgeResult.model_validate({**rec.judge.model_dump(), "workload_uuid": uuid, "status": status,
                                        "performance": perf.model_dump() if perf else None})
    return rec.model_copy(update={"judge": judge})


def test_export_then_import_round_trip(wh, tmp_path):
    wh.upsert_turns([
        _judged(0), _judged(1, created_at="2026-01-01T00:05:00+00:00"),  # same kernel: one solution, two traces
        _judged(2, EvaluationStatus.INCORRECT_NUMERICAL, kernel=KERNEL + "// v2\n"),
        _judged(3, EvaluationStatus.INFRA_ERROR),  # no verdict about the kernel: not exported
        full_turn(turn=4, judge=None),  # never judged: not exported
    ])
    out = tmp_path / "ds"
    counts = export_campaign_traces(wh, "c1", out)
    assert counts == {"traces": 3, "solutions": 2, "definitions": 1, "skipped_turns": 2}
    (trace_file,) = (out / "traces").rglob("*.jsonl")
    assert trace_file.relative_to(out).parts == ("traces", "replay-demo", "gemm", "gemm_n7168_k5120.jsonl")
    traces = [Trace.model_validate_json(line) for line in trace_file.read_text().splitlines()]
    assert [t.evaluation.status for t in traces] == [EvaluationStatus.PASSED, EvaluationStatus.PASSED,
                                                    EvaluationStatus.INCORRECT_NUMERICAL]
    assert traces[0].evaluation.performance.reference_latency_ms == 0.82
    assert traces[0].evaluation.environment.hardware == "NVIDIA H200"
    sols = [Solution.model_validate_json(p.read_text()) for p in (out / "solutions").rglob("*.json")]
    assert {s.name for s in sols} == {t.solution for t in traces}
    assert {s.sources[0].content for s in sols} == {KERNEL, KERNEL + "// v2\n"}

    with Warehouse(tmp_path / "other.duckdb") as other:
        got = import_dataset(other, out)
        assert got == {"definitions": 1, "workloads": len(get_problem("gemm_n7168_k5120").workloads),
                       "solutions": 2, "traces": 3}
        _, rows = other.sql("SELECT status, count(*) FROM fi_traces GROUP BY 1 ORDER BY 1")
        assert rows == [("INCORRECT_NUMERICAL", 1), ("PASSED", 2)]
        import_dataset(other, out)  # idempotent: traces are identified by their content hash
        assert other.sql("SELECT count(*) FROM fi_traces")[1] == [(3,)]


def test_import_problems_folder(wh, repo_root):
    got = import_dataset(wh, repo_root / "problems")
    assert got["definitions"] == 16 and got["traces"] == 0 and got["workloads"] >= 16
    _, rows = wh.sql("SELECT op_type, count(*) FROM fi_definitions GROUP BY 1 ORDER BY 1")
    assert dict(rows)["gemm"] == 1


def test_bad_trace_line_is_named(wh, tmp_path):
    bad = tmp_path / "ds" / "traces" / "x.jsonl"
    bad.parent.mkdir(parents=True)
    bad.write_text(json.dumps({"definition": "d"}) + "\n")
    with pytest.raises(InterchangeError, match=r"x\.jsonl:1: invalid Trace"):
        import_dataset(wh, tmp_path / "ds")
    with pytest.raises(InterchangeError, match="not a directory"):
        import_dataset(wh, tmp_path / "nope")


def test_export_of_unknown_campaign_fails(wh, tmp_path):
    with pytest.raises(WarehouseError, match="no turns"):
        export_campaign_traces(wh, "missing", tmp_path)
