"""Turn outcomes become warehouse records; records become MLflow-style step metrics."""

from __future__ import annotations

from datetime import UTC, datetime

from ptxcore.schema import (
    CompileStatus,
    EvaluationStatus,
    TargetInstruction,
    TargetWork,
    TurnRecord,
    text_sha256,
)

from .plan import TrajectoryPlan
from .types import TurnOutcome


def now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def turn_record(plan: TrajectoryPlan, outcome: TurnOutcome, prompt_sha256: str) -> TurnRecord:
    """The warehouse record of one turn (keyed by campaign, trajectory, turn)."""
    ev = outcome.evaluation
    code = outcome.extraction.code
    return TurnRecord(
        campaign_id=plan.campaign_id, trajectory_id=plan.trajectory_id, turn=outcome.turn,
        model=plan.model.model, arch=plan.arch, gpu=ev.gpu, prompt_variant=plan.prompt_variant,
        problem=plan.problem, prompt_sha256=prompt_sha256,
        kernel_sha256=text_sha256(code) if code is not None else None, kernel_text=code,
        response_text=outcome.reply.text, reasoning_text=outcome.reply.reasoning, usage=outcome.reply.usage,
        status=ev.status, target_instruction=ev.target_instruction, speedup=ev.speedup,
        feedback=outcome.feedback, compile=ev.compile, judge=ev.judge, environment=ev.environment,
        created_at=now_iso(), augmentation=outcome.augmentation,
    )


def step_metrics(record: TurnRecord) -> dict[str, float]:
    """Per-turn metrics (MLflow step = turn). `correct` / `target_executed` only when the verdict is known, with
    `recorded_verdict` 1 where that verdict (and the speedup) was reused from a recorded judgement, 0 where measured;
    `target_carries` only where a work verdict exists, `target_work_share` (FLOPs share) only where it was measured."""
    status = record.status
    compiled = record.compile is not None and record.compile.status is CompileStatus.COMPILED
    metrics: dict[str, float] = {
        "turn": float(record.turn),
        "extracted": float(status is not EvaluationStatus.EXTRACTION_ERROR),
        "compiled": float(compiled),
        "gpu_judged": float(compiled and status.counts_against_model),
        "prompt_tokens": float(record.usage.prompt_tokens),
        "completion_tokens": float(record.usage.completion_tokens),
        "reasoning_tokens": float(record.usage.reasoning_tokens),
        "llm_latency_s": float(record.usage.latency_s),
    }
    if status.counts_against_model:  # unknown for NOT_EVALUATED / INFRA_ERROR: not logged
        metrics["correct"] = float(status is EvaluationStatus.PASSED)
        metrics["target_executed"] = float(record.target_instruction is TargetInstruction.EXECUTED)
        metrics["recorded_verdict"] = float(record.judge is not None and record.judge.recorded is not None)
        if record.target_work is not TargetWork.UNKNOWN:  # issue 25: the strict credit, only where measured
            metrics["target_carries"] = float(record.target_work is TargetWork.CARRIES)
    work = record.judge.target_instruction.work if record.judge is not None else None
    if work is not None and work.flops_share is not None:
        metrics["target_work_share"] = float(work.flops_share)
    if record.speedup is not None:
        metrics["speedup"] = float(record.speedup)
    if record.usage.cost_usd is not None:
        metrics["cost_usd"] = float(record.usage.cost_usd)
    return metrics
