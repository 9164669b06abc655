"""A verdict whose error statistics are not finite (a candidate that writes NaN or Inf) survives the task
store and the HTTP API unchanged. Found on the H200: the demo campaign's NaN-writing attention turn made
every poll of its task fail with HTTP 500 (the stored JSON held null where a float was required)."""

from __future__ import annotations

import math

from ptxcore.gpu.service.client import ProfilerClient
from ptxcore.gpu.service.models import TaskKind
from ptxcore.gpu.service.outcome import verdict_result
from ptxcore.gpu.service.store import TaskStore
from ptxcore.schema import CorrectnessStats, EvaluationStatus, JudgeCorrectness, JudgeResult

from .test_store import _item, attempt, create


def nan_result(item) -> JudgeResult:
    base = verdict_result(item, EvaluationStatus.RUNTIME_ERROR, "output holds NaN")
    stats = CorrectnessStats(trials=3, matched_ratio=float("nan"), allclose=False, mismatched=0, numel=10,
                             nan_count=10, inf_count=0, timed_calls_verified=0, timed_calls_passed=0)
    correctness = JudgeCorrectness(max_relative_error=float("nan"), max_absolute_error=float("inf"), stats=stats)
    return JudgeResult.model_validate({**base.model_dump(), "status": EvaluationStatus.INCORRECT_NUMERICAL,
                                       "correctness": correctness.model_dump()})


def _assert_nonfinite(result: JudgeResult) -> None:
    assert result.status is EvaluationStatus.INCORRECT_NUMERICAL
    assert math.isnan(result.correctness.max_relative_error)
    assert math.isinf(result.correctness.max_absolute_error)
    assert math.isnan(result.correctness.stats.matched_ratio)


def test_nonfinite_errors_round_trip_through_the_store(tmp_path):
    store = TaskStore(tmp_path / "t.sqlite3")
    view = create(store)
    assert store.mark_running(view.task_id, 0)
    store.complete(view.task_id, attempt(0), nan_result(_item(view)))
    _assert_nonfinite(store.get(view.task_id).result)


def test_nonfinite_errors_reach_the_client_over_http(start_service):
    svc = start_service(gpus=(0,))
    store = svc.service.store
    view = store.create(kind=TaskKind.EVALUATE, definition="gemm_n7168_k5120", workload_uuid="w", arch="hopper",
                        source_sha256="b" * 64, client_tag="nan", timeout_s=5)
    assert store.mark_running(view.task_id, 0)
    store.complete(view.task_id, attempt(0), nan_result(_item(view)))
    with ProfilerClient(svc.url, timeout_s=30) as client:
        got = client.wait(view.task_id)
        many = client.poll_many([view.task_id])
    _assert_nonfinite(got.result)
    _assert_nonfinite(many[0].result)
