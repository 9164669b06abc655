"""Builders of fully populated records for the warehouse tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from ptxcore.schema import (
    CampaignRecord,
    CompileResult,
    CompileStatus,
    CorrectnessStats,
    EnvironmentInfo,
    EvaluationStatus,
    JudgeCorrectness,
    JudgeResult,
    KernelResources,
    LLMUsage,
    Performance,
    PtxasResources,
    SanitizerSummary,
    SassReport,
    StaticTarget,
    TargetInstruction,
    TargetInstructionEvidence,
    TrajectoryRecord,
    TurnRecord,
)
from ptxcore.warehouse import Warehouse

KERNEL = '#include <cuda_runtime.h>\n__global__ void k(float* x) { x[threadIdx.x] = 1.0f; }\n'


def full_turn(campaign: str = "c1", trajectory: str = "t0", turn: int = 0, **over) -> TurnRecord:
    """A turn with every nested part filled in (compile, judge, evidence, environment, usage)."""
    env = EnvironmentInfo(gpu_name="NVIDIA H200", driver_version="580.65", cuda_toolkit="13.0.88",
                          torch_version="2.11", sm_clock_mhz_before=1980, throttle_reasons=["none"],
                          library_versions={"cupy": "13.6"})
    compile_ = CompileResult(
        status=CompileStatus.COMPILED, source_sha256="ab" * 32, arch="hopper", flags=["-O3"],
        toolkit_version="13.0.88", resources=PtxasResources(kernels=[
            KernelResources(function="_Z1kPf", arch="sm_90a", registers=168, shared_bytes=49152,
                            spill_store_bytes=8, spill_load_bytes=4)]),
        cubin_sha256="cd" * 32, duration_s=3.5,
    )
    evidence = TargetInstructionEvidence(
        status=TargetInstruction.EXECUTED, static=StaticTarget.PRESENT,
        family_thread_inst_executed={"gmma": 4096}, raw_rows=[{"opcode": "HGMMA.64x128x16", "count": 4096}],
        tool="ncu 2025.3.1", source_sha256="ab" * 32, cubin_sha256="cd" * 32,
    )
    judge = JudgeResult(
        status=EvaluationStatus.PASSED, definition="gemm_n7168_k5120", workload_uuid="w-1", arch="hopper",
        correctness=JudgeCorrectness(max_relative_error=1e-3, max_absolute_error=2e-3, stats=CorrectnessStats(
            trials=3, matched_ratio=1.0, allclose=True, mismatched=0, numel=100, nan_count=0, inf_count=0,
            timed_calls_verified=150, timed_calls_passed=150)),
        performance=Performance(latency_ms=0.9, reference_latency_ms=0.82, speedup_factor=0.82 / 0.9),
        sanitizer=SanitizerSummary(ran=1), target_instruction=evidence, compile=compile_,
        sass=SassReport(arch="hopper", counts={"HGMMA": 8}, target_static=StaticTarget.PRESENT),
        environment=env, stage_seconds={"build": 3.5, "timing": 1.25},
    )
    fields = dict(
        campaign_id=campaign, trajectory_id=trajectory, turn=turn, model="replay/demo", arch="hopper",
        gpu="NVIDIA H200", prompt_variant="p0", problem="gemm_n7168_k5120", prompt_sha256="ef" * 32,
        kernel_sha256="ab" * 32, kernel_text=KERNEL, response_text=f"```cpp\n{KERNEL}```",
        reasoning_text="think", usage=LLMUsage(prompt_tokens=1000, completion_tokens=500, reasoning_tokens=300,
                                              cached_tokens=10, latency_s=12.5, cost_usd=0.0125),
        status=EvaluationStatus.PASSED, target_instruction=TargetInstruction.EXECUTED,
        speedup=0.82 / 0.9, feedback="correct", compile=compile_, judge=judge, environment=env,
        created_at="2026-01-01T00:00:00+00:00",
    )
    fields.update(over)
    return TurnRecord(**fields)


def trajectory(campaign: str = "c1", trajectory_id: str = "t0", **over) -> TrajectoryRecord:
    fields = dict(campaign_id=campaign, trajectory_id=trajectory_id, model="replay/demo", arch="hopper",
                  prompt_variant="p0", problem="gemm_n7168_k5120")
    fields.update(over)
    return TrajectoryRecord(**fields)


def campaign(campaign_id: str = "c1") -> CampaignRecord:
    return CampaignRecord(campaign_id=campaign_id, name="demo", config_yaml="a: 1\n", config_sha256="00")


@pytest.fixture
def wh(tmp_path):
    with Warehouse(tmp_path / "w.duckdb") as w:
        yield w


REPO = Path(__file__).resolve().parents[2]
EXCERPT_CSV = REPO / "tests" / "fixtures" / "data" / "ptxbench_per_turn_excerpt.csv"


SHIPPED_GZ = REPO / "data" / "ptxbench" / "ptxbench_per_turn.csv.gz"
"""The authors' per-turn results, shipped compressed with their notice (data/ptxbench/)."""


def full_csv_path():
    """The published per-turn results: the shipped compressed copy (every clone has it)."""
    return SHIPPED_GZ


@pytest.fixture(scope="session")
def excerpt_db(tmp_path_factory):
    """A warehouse holding the committed excerpt (ten complete runs)."""
    from ptxcore.warehouse.ptxbench_import import import_ptxbench_csv

    path = tmp_path_factory.mktemp("excerpt") / "w.duckdb"
    with Warehouse(path) as w:
        import_ptxbench_csv(w, str(EXCERPT_CSV))
    return path


@pytest.fixture(scope="session")
def full_db(tmp_path_factory):
    """A warehouse holding all 13,674 published turns (from the shipped compressed copy)."""
    from ptxcore.warehouse.ptxbench_import import import_ptxbench_csv

    csv_path = full_csv_path()
    path = tmp_path_factory.mktemp("full") / "w.duckdb"
    with Warehouse(path) as w:
        import_ptxbench_csv(w, str(csv_path))
    return path
