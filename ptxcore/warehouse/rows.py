"""Records <-> table rows. Pure Python (no duckdb): every function maps one schema object to one row.

A TurnRecord is spread over `turns` (flat fields), `kernels` (text once per sha256), `evaluations`
(the judge envelope flattened, raw JSON kept), `target_evidence` (raw ncu rows) and `environments`
(by content hash). `turn_from_row` puts it back together so that a written record reads back equal.
"""

from __future__ import annotations

import json
from typing import Any

from ptxcore.schema import (
    CampaignRecord,
    CompileResult,
    EnvironmentInfo,
    FeedbackAugmentation,
    ItemKind,
    JudgeResult,
    LLMUsage,
    TrajectoryRecord,
    TurnRecord,
    text_sha256,
)


def environment_row(env: EnvironmentInfo) -> dict[str, Any]:
    raw = env.model_dump_json()
    return {
        "sha256": text_sha256(raw), "gpu_name": env.gpu_name, "driver_version": env.driver_version,
        "cuda_toolkit": env.cuda_toolkit, "torch_version": env.torch_version, "raw_json": raw,
    }


def campaign_row(rec: CampaignRecord) -> dict[str, Any]:
    return rec.model_dump(mode="json")


def trajectory_row(rec: TrajectoryRecord) -> dict[str, Any]:
    return rec.model_dump(mode="json")


def turn_row(rec: TurnRecord, environment_sha256: str) -> dict[str, Any]:
    """The `turns` row of a record (kernel text goes to `kernels` under `kernel_key`)."""
    u = rec.usage
    return {
        "campaign_id": rec.campaign_id, "trajectory_id": rec.trajectory_id, "turn": rec.turn,
        "model": rec.model, "arch": rec.arch, "gpu": rec.gpu, "prompt_variant": rec.prompt_variant,
        "problem": rec.problem, "prompt_sha256": rec.prompt_sha256, "kernel_sha256": rec.kernel_sha256,
        "kernel_key": text_sha256(rec.kernel_text) if rec.kernel_text is not None else None,
        "response_text": rec.response_text, "reasoning_text": rec.reasoning_text,
        "prompt_tokens": u.prompt_tokens, "completion_tokens": u.completion_tokens,
        "reasoning_tokens": u.reasoning_tokens, "cached_tokens": u.cached_tokens,
        "llm_latency_s": u.latency_s, "cost_usd": u.cost_usd,
        "status": rec.status.value, "target_instruction": rec.target_instruction.value,
        "speedup": rec.speedup, "feedback": rec.feedback,
        "compile_status": rec.compile.status.value if rec.compile else None,
        "compile_json": rec.compile.model_dump_json() if rec.compile else None,
        "environment_sha256": environment_sha256, "created_at": rec.created_at,
        "schema_version": rec.schema_version,
    }


def total_stage_seconds(stages: dict[str, float]) -> float:
    """The judgement's wall time: its `total` stage when it has one (which already spans the others), else the sum."""
    return float(stages["total"]) if "total" in stages else float(sum(stages.values()))


def evaluation_row(rec: TurnRecord, judge: JudgeResult, environment_sha256: str) -> dict[str, Any]:
    """The judge envelope flattened into one `evaluations` row (raw JSON kept for re-judging)."""
    c, p, s = judge.correctness, judge.performance, judge.sanitizer
    comp = judge.compile or rec.compile
    kernels = comp.resources.kernels if comp else []
    return {
        "campaign_id": rec.campaign_id, "trajectory_id": rec.trajectory_id, "turn": rec.turn,
        "status": judge.status.value, "reason": judge.reason, "definition": judge.definition,
        "workload_uuid": judge.workload_uuid, "arch": judge.arch,
        "max_absolute_error": c.max_absolute_error if c else None,
        "max_relative_error": c.max_relative_error if c else None,
        "correctness_extra_json": c.stats.model_dump_json() if c and c.stats is not None else None,
        "latency_ms": p.latency_ms if p else None,
        "reference_latency_ms": p.reference_latency_ms if p else None,
        "speedup": p.speedup_factor if p else None,
        "sanitizer_ran": s.ran if s else None, "sanitizer_errors": s.errors if s else None,
        "compile_status": comp.status.value if comp else None,
        "max_registers": comp.resources.max_registers if comp else None,
        "total_spill_bytes": comp.resources.total_spill_bytes if comp else None,
        "max_shared_bytes": max((k.shared_bytes for k in kernels), default=0) if comp else None,
        "target_instruction": judge.target_instruction.status.value,
        "stage_seconds_json": json.dumps(judge.stage_seconds),
        "total_stage_s": total_stage_seconds(judge.stage_seconds),
        "environment_sha256": environment_sha256, "raw_json": judge.model_dump_json(),
        "arbitration": ",".join(sorted({a.outcome.value for a in c.arbitrations})) or None if c else None,
    }


def evidence_row(rec: TurnRecord, judge: JudgeResult) -> dict[str, Any]:
    """The `target_evidence` row: the paper's status and counts, and the work share with its verdict (issue 25)."""
    ev = judge.target_instruction
    w = ev.work
    return {
        "campaign_id": rec.campaign_id, "trajectory_id": rec.trajectory_id, "turn": rec.turn,
        "status": ev.status.value, "static": ev.static.value if ev.static else None,
        "family_thread_inst_executed_json": json.dumps(ev.family_thread_inst_executed),
        "raw_rows_json": json.dumps(ev.raw_rows), "n_raw_rows": len(ev.raw_rows),
        "tool": ev.tool, "reason": ev.reason, "source_sha256": ev.source_sha256,
        "cubin_sha256": ev.cubin_sha256, "carries": ev.carries.value,
        "work_share": w.flops_share if w else None, "target_flops": w.target_flops if w else None,
        "target_flops_bound": w.target_flops_bound if w else None, "problem_flops": w.problem_flops if w else None,
        "tma_instructions": w.tma_instructions if w else None, "work_reason": w.reason if w else None,
    }


def augmentation_row(rec: TurnRecord, aug: FeedbackAugmentation) -> dict[str, Any]:
    """The `turn_augmentations` row: the retrieval condition of the turn and what was shown."""
    count = {kind: sum(i.kind is kind for i in aug.items) for kind in ItemKind}
    return {
        "campaign_id": rec.campaign_id, "trajectory_id": rec.trajectory_id, "turn": rec.turn,
        "condition": aug.condition.value, "status": aug.status.value, "source": aug.source,
        "source_sha256": aug.source_sha256, "n_groups": count[ItemKind.GROUP], "n_notes": count[ItemKind.NOTE],
        "n_fixed_kernels": count[ItemKind.FIXED_KERNEL], "appended_chars": aug.appended_chars,
        "items_json": json.dumps([i.model_dump(mode="json") for i in aug.items]), "raw_json": aug.model_dump_json(),
    }


def turn_from_row(row: dict[str, Any]) -> TurnRecord:
    """Rebuild a TurnRecord from a `turns` row joined with kernel text, judge JSON and environment JSON."""
    usage = LLMUsage(
        prompt_tokens=row["prompt_tokens"], completion_tokens=row["completion_tokens"],
        reasoning_tokens=row["reasoning_tokens"], cached_tokens=row["cached_tokens"],
        latency_s=row["llm_latency_s"], cost_usd=row["cost_usd"],
    )
    return TurnRecord(
        schema_version=row["schema_version"], campaign_id=row["campaign_id"],
        trajectory_id=row["trajectory_id"], turn=row["turn"], model=row["model"], arch=row["arch"],
        gpu=row["gpu"], prompt_variant=row["prompt_variant"], problem=row["problem"],
        prompt_sha256=row["prompt_sha256"], kernel_sha256=row["kernel_sha256"],
        kernel_text=row["kernel_text"], response_text=row["response_text"],
        reasoning_text=row["reasoning_text"], usage=usage, status=row["status"],
        target_instruction=row["target_instruction"], speedup=row["speedup"], feedback=row["feedback"],
        compile=CompileResult.model_validate_json(row["compile_json"]) if row["compile_json"] else None,
        judge=JudgeResult.model_validate_json(row["judge_json"]) if row["judge_json"] else None,
        environment=EnvironmentInfo.model_validate_json(row["environment_json"]),
        created_at=row["created_at"],
        augmentation=FeedbackAugmentation.model_validate_json(row["augmentation_json"])
        if row.get("augmentation_json") else None,
    )


def trajectory_from_row(row: dict[str, Any]) -> TrajectoryRecord:
    return TrajectoryRecord.model_validate(row)


def campaign_from_row(row: dict[str, Any]) -> CampaignRecord:
    return CampaignRecord.model_validate(row)
