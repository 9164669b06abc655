"""The CPU stages of a judgement (forbidden-source check, compile, static SASS) for hosts without a GPU."""

from __future__ import annotations

from ptxcore.arch import Architecture
from ptxcore.compile import BuildOptions, CompileCache, compile_candidate
from ptxcore.problems import Problem
from ptxcore.schema import (
    CompileStatus,
    EvaluationStatus,
    JudgeResult,
    StaticTarget,
    TargetInstruction,
    TargetInstructionEvidence,
)

from .config import JudgeConfig

NO_GPU_REASON = ("no GPU is available on this machine: only the CPU stages ran (source check, compile, "
                 "static SASS); memory safety, correctness, timing and target-instruction execution need a GPU host")


def cpu_stages(source: str, problem: Problem, arch: Architecture, config: JudgeConfig | None = None,
               workload_uuid: str | None = None) -> JudgeResult:
    """REJECTED / COMPILE_ERROR are final verdicts; a compiled candidate is NOT_EVALUATED."""
    cfg = config or JudgeConfig()
    compiled = compile_candidate(source, BuildOptions(arch, timeout_s=cfg.build_timeout_s),
                                 CompileCache(cfg.cache_root() / "compile"))
    res = compiled.result
    static = compiled.sass.target_static if compiled.sass is not None else None
    target = TargetInstructionEvidence(
        status=TargetInstruction.ABSENT if static is StaticTarget.ABSENT else TargetInstruction.UNKNOWN,
        static=static, reason="static SASS only (no GPU)",
    )
    if res.status is CompileStatus.REJECTED:
        status, reason = EvaluationStatus.REJECTED, res.reason
    elif res.status is CompileStatus.COMPILE_ERROR:
        status, reason = EvaluationStatus.COMPILE_ERROR, res.reason
    else:
        status, reason = EvaluationStatus.NOT_EVALUATED, NO_GPU_REASON
    return JudgeResult(
        status=status, reason=reason, definition=problem.name, workload_uuid=problem.workload(workload_uuid).uuid,
        arch=arch.key, target_instruction=target, compile=res, sass=compiled.sass,
        stage_seconds={"build": res.duration_s}, log=res.log if status is EvaluationStatus.COMPILE_ERROR else "",
    )
