"""Whether processes outside the judge shared its GPU (issue 24 follow-up).

The device meter counts every process's work on the GPU. A trial it calls forged could therefore also be another
job's kernels in the windows (seen on the H200 in a pytest run whose other tests ran GPU work). Before a
forged-timing verdict stands, the judge asks NVML which processes hold a compute context on the GPU: any that is
not the judge or one of its descendants (the candidate's sandbox and everything in it) makes the audit
inconclusive, so the judgement is INFRA_ERROR, never a REWARD_HACK the candidate did not commit, nor a pass.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from ptxcore.gpu.errors import InfraError
from ptxcore.sandbox.process import descendants


def foreign_pids(gpu_pids: set[int] | None, judge_pid: int | None = None, proc: Path = Path("/proc")) -> list[int]:
    """The GPU's processes that are neither the judge nor below it, sorted (empty when NVML could not say)."""
    if not gpu_pids:
        return []
    ours = set(descendants([judge_pid if judge_pid is not None else os.getpid()], proc))
    return sorted(gpu_pids - ours)


def shared_gpu(forged_reason: str, gpu_pids: Callable[[], set[int] | None], judge_pid: int | None = None,
               proc: Path = Path("/proc")) -> None:
    """Raise InfraError when processes outside the judge hold the GPU that a forged-timing verdict was metered on."""
    others = foreign_pids(gpu_pids(), judge_pid, proc)
    if others:
        raise InfraError(f"the timing audit cannot conclude: process(es) {', '.join(map(str, others[:5]))} outside "
                         f"the judge held the GPU while it was metered ({forged_reason[:300]})")
