"""ptxcore.gpu: the GPU judge (see docs/architecture.md "Evaluation protocol").

Rooms, named for who runs where:
  pipeline/  the judge's process: the stages of one judgement and the JudgeResult they fold into
  harness/   the judge's process: workload and reference tensors, buffers shared with the child,
             comparisons, timing, monitoring, the child's parent side, memcheck and ncu runs
  child/     the candidate's process: loads and calls one candidate (light imports)
  service/   the profiling service (HTTP front, one persistent worker process per GPU)
  probe.py   the one GPU probe; messages.py the typed pipe messages; config.py the protocol's knobs

Importing this package works on a CPU machine: torch, cupy, cupti and tvm_ffi are imported lazily inside
the functions that need them.

    from ptxcore.gpu import judge_candidate, JudgeConfig, gpu_available, NoGPUError
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ptxcore.gpu.errors import BaselineUnavailableError, InfraError, NoGPUError
from ptxcore.gpu.probe import gpu_architectures, gpu_available, visible_gpus

if TYPE_CHECKING:
    from ptxcore.arch import Architecture
    from ptxcore.compile import CompiledCandidate
    from ptxcore.gpu.config import JudgeConfig
    from ptxcore.problems import Problem
    from ptxcore.schema import JudgeResult, Language


def __getattr__(name: str) -> type[JudgeConfig]:  # lazy: the candidate child imports this package without pydantic
    if name == "JudgeConfig":
        from ptxcore.gpu.config import JudgeConfig

        return JudgeConfig
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def judge_candidate(
    source: str,
    problem: Problem,
    arch: Architecture,
    config: JudgeConfig | None = None,
    workload_uuid: str | None = None,
    compiled: CompiledCandidate | None = None,
    language: Language | str = "cuda",
) -> JudgeResult:
    """Judge one candidate on this host's GPU with the process-wide judge of this configuration.

    `compiled`: the CPU stage's build of the same source, reused when its artifact verifies (no second
    nvcc). `language`: cuda (`kernel.cu`) or triton (`kernel.py`, validated again here, imported only in the
    candidate's child). Raises NoGPUError when there is no GPU; every candidate fault is a returned verdict.
    """
    from ptxcore.gpu.pipeline.judge import default_judge

    return default_judge(config).judge(source, problem, arch, workload_uuid=workload_uuid, compiled=compiled,
                                       language=language)


__all__ = [
    "JudgeConfig", "judge_candidate", "gpu_available", "gpu_architectures", "visible_gpus", "NoGPUError",
    "InfraError", "BaselineUnavailableError",
]
