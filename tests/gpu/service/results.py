"""Scripted judge results for service tests: valid for their status (PASSED carries correctness and timing)."""

from __future__ import annotations

from ptxcore.gpu.service.models import WorkItem
from ptxcore.gpu.service.outcome import verdict_result
from ptxcore.schema import EvaluationStatus, JudgeCorrectness, JudgeResult, Performance


def scripted_result(item: WorkItem, status: EvaluationStatus, reason: str = "") -> JudgeResult:
    base = verdict_result(item, EvaluationStatus.RUNTIME_ERROR, reason).model_dump()
    if status in (EvaluationStatus.PASSED, EvaluationStatus.INCORRECT_NUMERICAL):
        base["correctness"] = JudgeCorrectness(max_absolute_error=0.0 if status is EvaluationStatus.PASSED else 2.0)
    if status is EvaluationStatus.PASSED:
        base["performance"] = Performance(latency_ms=1.0, reference_latency_ms=0.8, speedup_factor=0.8)
    return JudgeResult.model_validate({**base, "status": status})
