"""The one GPU probe: which GPUs this process can use, and which architectures they run.

Asks the CUDA driver (stdlib ctypes, no torch), so CUDA_VISIBLE_DEVICES is respected and a machine
without a driver simply has none. `PTXBENCH_FORCE_NO_GPU=1` makes a GPU host behave as a CPU machine
(tests of the CPU paths). Every caller — the judge, `ptxbench eval`, judge-route selection, the tests'
`gpu` marker — asks here.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from functools import lru_cache

from ptxcore.arch import Architecture, architecture_for_capability

FORCE_NO_GPU_ENV = "PTXBENCH_FORCE_NO_GPU"


@dataclass(frozen=True)
class GpuInfo:
    """One visible device."""

    index: int
    name: str
    compute_capability: tuple[int, int]

    @property
    def architecture(self) -> Architecture | None:
        """The architecture whose candidates this GPU executes (None: one we do not judge for)."""
        return architecture_for_capability(self.compute_capability)


@lru_cache(maxsize=1)
def _devices() -> tuple[GpuInfo, ...]:
    from ptxcore.gpu.child import driver

    return tuple(GpuInfo(i, name, cc) for i, (name, cc) in enumerate(driver.devices()))


def visible_gpus() -> tuple[GpuInfo, ...]:
    """The GPUs CUDA shows this process (empty without a driver, or when forced off)."""
    if os.environ.get(FORCE_NO_GPU_ENV):
        return ()
    return _devices()


def gpu_available() -> bool:
    return bool(visible_gpus())


def gpu_architectures() -> set[str]:
    """Architecture keys this host can judge on."""
    return {g.architecture.key for g in visible_gpus() if g.architecture is not None}
