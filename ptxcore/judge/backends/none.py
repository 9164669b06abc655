"""No GPU judge: the CPU stages (source check, compile, static SASS; for Triton the static validator) and
nothing invented.

The only producer of NOT_EVALUATED: a candidate that passed its CPU stage gets that explicit status with no
correctness or timing; REJECTED and COMPILE_ERROR stay final verdicts; the target instruction is what the
static SASS proves (absent) or unknown (always unknown for Triton: its cubins exist only on a GPU host).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from ptxcore.compile import BuildOptions, CompileCache, CompiledCandidate, build_candidate
from ptxcore.schema import EvaluationStatus, JudgeResult, Language, TargetInstructionEvidence

if TYPE_CHECKING:
    from ptxcore.arch import Architecture
    from ptxcore.gpu.config import JudgeConfig
    from ptxcore.problems import Problem

NO_GPU_REASON = ("no GPU is available on this machine: only the CPU stages ran (source check, compile, "
                 "static SASS); memory safety, correctness, timing and target-instruction execution need a GPU host")


class NoGpuJudge:
    """Every compiled turn is NOT_EVALUATED; `reason` says why no GPU judged it. Stage times are this judgement's
    own (`build` only when it built the candidate itself; the CPU stage's build time is in `compile.duration_s`)."""

    def __init__(self, reason: str = NO_GPU_REASON, config: JudgeConfig | None = None) -> None:
        self.name = "none"
        self.reason = reason
        self.config = config

    def judge(self, source: str, problem: Problem, arch: Architecture, *, compiled: CompiledCandidate | None = None,
              workload_uuid: str | None = None, language: Language = Language.CUDA) -> JudgeResult:
        started = time.monotonic()
        stages: dict[str, float] = {}
        if compiled is None:  # a build made here is a stage of this judgement; a given one was the CPU stage's
            compiled = self._compile(source, arch, language)
            stages["build"] = round(time.monotonic() - started, 6)
        res = compiled.result
        status = res.verdict or EvaluationStatus.NOT_EVALUATED
        reason = res.reason if res.verdict is not None else self.reason
        evidence = TargetInstructionEvidence.from_static(compiled.sass, "static SASS only (no GPU)",
                                                         res.source_sha256, res.cubin_sha256)
        return JudgeResult(
            status=status, reason=reason, definition=problem.name, workload_uuid=problem.workload(workload_uuid).uuid,
            arch=arch.key, target_instruction=evidence, compile=res, sass=compiled.sass,
            stage_seconds={**stages, "total": round(time.monotonic() - started, 6)},
            log=res.log if status is EvaluationStatus.COMPILE_ERROR else "",
        )

    def _compile(self, source: str, arch: Architecture, language: Language) -> CompiledCandidate:
        from ptxcore.gpu.config import JudgeConfig

        cfg = self.config or JudgeConfig()
        return build_candidate(source, BuildOptions(arch, timeout_s=cfg.build_timeout_s),
                               CompileCache(cfg.cache_root() / "compile"), language=language)


def cpu_stages(source: str, problem: Problem, arch: Architecture, config: JudgeConfig | None = None,
               workload_uuid: str | None = None, language: Language = Language.CUDA) -> JudgeResult:
    """What a machine without a GPU can say about a candidate."""
    return NoGpuJudge(NO_GPU_REASON, config).judge(source, problem, arch, workload_uuid=workload_uuid,
                                                   language=language)
