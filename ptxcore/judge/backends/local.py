"""This host's GPU, through ptxcore.gpu's judge (reuses the CPU stage's build when it verifies)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ptxcore.schema import Language

if TYPE_CHECKING:
    from ptxcore.arch import Architecture
    from ptxcore.compile import CompiledCandidate
    from ptxcore.gpu.config import JudgeConfig
    from ptxcore.problems import Problem
    from ptxcore.schema import JudgeResult


class LocalGpuJudge:
    name = "local-gpu"

    def __init__(self, config: JudgeConfig | None = None) -> None:
        self.config = config

    def judge(self, source: str, problem: Problem, arch: Architecture, *, compiled: CompiledCandidate | None = None,
              workload_uuid: str | None = None, language: Language = Language.CUDA) -> JudgeResult:
        from ptxcore.gpu import judge_candidate

        return judge_candidate(source, problem, arch, self.config, workload_uuid=workload_uuid, compiled=compiled,
                               language=language)
