"""The interface a worker process runs: one runner per GPU, holding that GPU's resident workload state.

An runner lives inside the persistent worker process (ptxcore.gpu.service.worker_main). The service
never imports it; it names it by `module:factory` in its configuration. Two exist: the real one
(judge_engine.JudgeRunner, wrapping ptxcore.gpu's judge) and FakeRunner (fake.py) for CPU tests and
`--fake` benchmark runs.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from enum import StrEnum
from pathlib import Path
from typing import Protocol

from ptxcore.gpu.service.models import GpuHealth, WorkItem
from ptxcore.schema import JudgeResult


class Phase(StrEnum):
    """Whose code a worker is executing: decides who is blamed if the process hangs or dies."""

    HARNESS = "harness"
    """Ours: a hang or death is an infrastructure failure (INFRA_ERROR, retried elsewhere)."""
    CANDIDATE = "candidate"
    """The candidate's code runs in this very process: a hang is TIMEOUT, a crash RUNTIME_ERROR."""


PhaseCallback = Callable[[Phase], None]


class GpuRunner(Protocol):
    """Judges work items on one GPU. An infrastructure failure raises; a bad kernel is a returned verdict."""

    def run(self, item: WorkItem, phase: PhaseCallback) -> JudgeResult:
        """Judge one item. Call phase(CANDIDATE) right before candidate code runs in this process and
        phase(HARNESS) right after (an runner that isolates candidates in child processes never does)."""
        ...

    def health(self) -> GpuHealth:
        """Read the GPU and this process's allocations (resident state vs the rest)."""
        ...

    def close(self) -> None:
        """Release the GPU state."""
        ...


RunnerFactory = Callable[..., GpuRunner]


def load_factory(spec: str) -> RunnerFactory:
    """`module:attr` -> the factory; called as factory(gpu=..., work_dir=..., **runner_args)."""
    module_name, _, attr = spec.partition(":")
    if not module_name or not attr:
        raise ValueError(f"runner must be `module:factory`, got {spec!r}")
    module = importlib.import_module(module_name)
    return getattr(module, attr)


def make_runner(spec: str, gpu: int, work_dir: Path, runner_args: dict) -> GpuRunner:
    return load_factory(spec)(gpu=gpu, work_dir=work_dir, **runner_args)
