"""Turn records for adapt tests: real problems and prompts (hashes match the prompts package), fake verdicts."""

from __future__ import annotations

from pathlib import Path

import pytest

from ptxcore.adapt.repair import source_prompt
from ptxcore.schema import (
    CampaignRecord,
    EnvironmentInfo,
    EvaluationStatus,
    JudgeResult,
    StopReason,
    TargetInstruction,
    TargetInstructionEvidence,
    TargetWork,
    TrajectoryRecord,
    TurnRecord,
    text_sha256,
)
from ptxcore.warehouse import Warehouse

VARIANT = "hopper-pack"
GPU = "Fake GPU (adapt tests)"


def kernel(tag: str) -> str:
    return f"// {tag}\n#include <cuda_runtime.h>\n__global__ void k() {{}}\nvoid run() {{ k<<<1, 1>>>(); }}\n"


def answer(code: str | None, closed: bool = True) -> str:
    if code is None:
        return "I could not write a kernel this time."
    return f"Plan: fill the output.\n\n```cpp\n{code}```" + ("" if closed else "\n(and more")


def judge(problem: str, status: EvaluationStatus, target: TargetInstruction, speedup: float | None,
          recorded: str | None = None, work: TargetWork | None = None) -> JudgeResult:
    """`work`: the evidence's carries verdict (default: carries when the target executed, else does not carry)."""
    from ptxcore.schema import JudgeCorrectness, Performance, RecordedVerdict, TargetWorkShare

    if work is None:
        work = TargetWork.CARRIES if target is TargetInstruction.EXECUTED else TargetWork.DOES_NOT_CARRY
    share = TargetWorkShare(problem_flops=100, problem_min_bytes=100, threshold=0.5, carries=work, reason="fake")

    passed = status is EvaluationStatus.PASSED
    perf = None if speedup is None or not passed else Performance(
        latency_ms=1 / max(speedup, 1e-3), reference_latency_ms=1.0, speedup_factor=speedup)
    wrong = status in (EvaluationStatus.PASSED, EvaluationStatus.INCORRECT_NUMERICAL)
    correctness = JudgeCorrectness(max_absolute_error=0.0 if passed else 1.0) if wrong else None
    return JudgeResult(status=status, definition=problem, arch="hopper", performance=perf, correctness=correctness,
                       target_instruction=TargetInstructionEvidence(status=target, tool="fake", work=share),
                       environment=EnvironmentInfo(gpu_name=GPU, driver_version="580.0"),
                       recorded=None if recorded is None else RecordedVerdict(
                           source=recorded, trace_sha256="0" * 64, gpu_name=GPU, judged_at="2026-12-01T00:00:00Z"))


def turn(campaign: str, trajectory: str, n: int, problem: str, status: EvaluationStatus, *, model: str = "qwen",
         variant: str = VARIANT, code: str | None = "auto", closed: bool = True, speedup: float | None = None,
         target: TargetInstruction = TargetInstruction.UNKNOWN, feedback: str = "", prompt_sha: str | None = None,
         recorded: str | None = None, work: TargetWork | None = None) -> TurnRecord:
    if code == "auto":
        code = kernel(f"{campaign}/{trajectory}/{n}")
    judged = status not in (EvaluationStatus.EXTRACTION_ERROR, EvaluationStatus.COMPILE_ERROR)
    return TurnRecord(
        campaign_id=campaign, trajectory_id=trajectory, turn=n, model=model, arch="hopper",
        gpu=GPU if judged else "", prompt_variant=variant, problem=problem,
        prompt_sha256=prompt_sha if prompt_sha is not None else source_prompt(variant, problem).sha256,
        kernel_sha256=text_sha256(code) if code else None, kernel_text=code, response_text=answer(code, closed),
        status=status, target_instruction=target, speedup=speedup,
        feedback=feedback or f"Status: {status.value}\nerror: something went wrong at turn {n}",
        judge=judge(problem, status, target, speedup, recorded, work) if judged else None, created_at="2026-12-01T00:00:00+00:00")


def add_campaign(wh: Warehouse, campaign_id: str, turns: list[TurnRecord]) -> None:
    wh.upsert_campaign(CampaignRecord(campaign_id=campaign_id, name=campaign_id, config_yaml="x",
                                      config_sha256=text_sha256(campaign_id)))
    for tid in sorted({t.trajectory_id for t in turns}):
        mine = [t for t in turns if t.trajectory_id == tid]
        wh.upsert_trajectory(TrajectoryRecord(
            campaign_id=campaign_id, trajectory_id=tid, model=mine[0].model, arch="hopper",
            prompt_variant=mine[0].prompt_variant, problem=mine[0].problem, language="cuda", index=0, max_turns=8,
            num_turns=len(mine), stop_reason=StopReason.MAX_TURNS))
    wh.upsert_turns(turns)


@pytest.fixture
def wh(tmp_path: Path):
    with Warehouse(tmp_path / "wh.duckdb") as w:
        yield w
