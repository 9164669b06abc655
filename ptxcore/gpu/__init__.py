"""ptxcore.gpu: the GPU judge (see ARCHITECTURE.md "Evaluation protocol").

Importing this package works on a CPU machine: torch, cupy, cupti and tvm_ffi are imported lazily inside
the functions that need them.

    from ptxcore.gpu import judge_candidate, JudgeConfig, gpu_available, NoGPUError
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .errors import BaselineUnavailableError, InfraError, NoGPUError

if TYPE_CHECKING:
    from ptxcore.arch import Architecture
    from ptxcore.problems import Problem
    from ptxcore.schema import JudgeResult

    from .config import JudgeConfig


def __getattr__(name: str):  # noqa: ANN202 - lazy: the candidate child imports this package without pydantic
    if name == "JudgeConfig":
        from .config import JudgeConfig

        return JudgeConfig
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def gpu_available() -> bool:
    """True when the CUDA driver is present and reports at least one device (no torch import)."""
    from .driver import gpu_available as _available

    return _available()


def judge_candidate(
    source: str,
    problem: Problem,
    arch: Architecture,
    config: JudgeConfig | None = None,
    workload_uuid: str | None = None,
) -> JudgeResult:
    """Judge one candidate on this host's GPU with the process-wide default engine.

    Raises NoGPUError when there is no GPU; every candidate fault is a returned verdict.
    """
    from .engine import default_engine

    return default_engine(config).judge(source, problem, arch, workload_uuid=workload_uuid)


__all__ = [
    "JudgeConfig", "judge_candidate", "gpu_available", "NoGPUError", "InfraError",
    "BaselineUnavailableError",
]
