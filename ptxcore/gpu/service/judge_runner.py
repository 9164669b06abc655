"""The real runner of a worker process: ptxcore.gpu's GpuJudge, one per GPU, whose workload state
(inputs and reference outputs on the GPU) and reference latencies stay resident between candidates.
Candidates run in the judge's own isolated child processes, so this process only ever executes our
code: its phase stays HARNESS (a hang or death here is an infrastructure failure).

The worker process is pinned to its GPU with CUDA_VISIBLE_DEVICES, so the judge uses device 0;
NVML, which ignores CUDA_VISIBLE_DEVICES, is addressed by the physical index (PTXBENCH_PHYSICAL_GPU).
"""

from __future__ import annotations

import logging
import os
import tempfile
from pathlib import Path

from ptxcore.arch import get_architecture
from ptxcore.gpu.service.health import read_gpu
from ptxcore.gpu.service.models import GpuHealth, TaskKind, WorkItem
from ptxcore.gpu.service.runner import PhaseCallback
from ptxcore.problems import Problem, get_problem
from ptxcore.schema import JudgeResult

log = logging.getLogger(__name__)


class JudgeRunner:
    """cache_state=False rebuilds the workload state and re-times the reference for every candidate
    (the 'without cached workload state' arm of benchmarks/service_throughput.py)."""

    def __init__(self, gpu: int, work_dir: Path, cache_state: bool = True, judge_config: dict | None = None,
                 warm: str | list[str] = "auto") -> None:
        from ptxcore.gpu.config import JudgeConfig
        from ptxcore.gpu.pipeline.judge import GpuJudge

        self.gpu = gpu
        self.physical = int(os.environ.get("PTXBENCH_PHYSICAL_GPU", gpu))
        self.cache_state = cache_state
        self.work_dir = Path(work_dir)
        self.judge = GpuJudge(JudgeConfig(**{**(judge_config or {}), "device": 0}))
        self._overhead: int | None = None
        self.warm = warm

    def warm_up(self) -> dict[str, float | None]:
        """Before the worker reports ready: the workload state and reference of the problems `warm` names
        (ptxcore.gpu.service.warm); seconds per problem."""
        from ptxcore.gpu.service.warm import problems_to_warm, warm

        def prepare(problem: Problem) -> None:
            self.judge.monitor_physical_gpu(self.physical)
            self.judge.warm(problem)

        return warm(problems_to_warm(self.warm), prepare)

    # -- judging ---------------------------------------------------------------------------------------

    def run(self, item: WorkItem, phase: PhaseCallback) -> JudgeResult:
        """/evaluate: the whole judgement; /sanitize and /profile: that stage alone, with its own status
        (SANITIZE_CLEAN, PROFILED) — correctness is not judged there."""
        problem, arch = get_problem(item.definition), get_architecture(item.arch)
        self.judge.monitor_physical_gpu(self.physical)
        if not self.cache_state:
            self.judge.drop_workload_state()
            self.judge.use_reference_cache(Path(tempfile.mkdtemp(prefix="ref-", dir=self.work_dir)))
        stage = {TaskKind.EVALUATE: self.judge.judge, TaskKind.SANITIZE: self.judge.sanitize_only,
                 TaskKind.PROFILE: self.judge.profile_only}[item.kind]
        return stage(item.source, problem, arch, workload_uuid=item.workload_uuid or None, language=item.language)

    # -- health ----------------------------------------------------------------------------------------

    def health(self) -> GpuHealth:
        reading = read_gpu(self.physical)
        resident = self._resident()
        used = self._process_bytes()
        allocated = 0
        if used is not None:
            overhead = used - sum(resident.values())
            if self._overhead is None:
                self._overhead = overhead  # context, L2-flush buffer, allocator slack at first sight
            allocated = sum(resident.values()) + max(0, overhead - self._overhead)
        return reading.model_copy(update={"gpu": self.gpu, "resident": resident, "worker_allocated_bytes": allocated})

    def _resident(self) -> dict[str, int]:
        return self.judge.resident_bytes()

    def _process_bytes(self) -> int | None:
        """Device memory this process holds: torch's allocations plus CuPy's pool (None before CUDA)."""
        try:
            import torch

            if not torch.cuda.is_initialized():
                return None
            total = torch.cuda.memory_allocated(0)
            try:
                import cupy

                total += cupy.get_default_memory_pool().used_bytes()
            except ImportError:
                pass
            return int(total)
        except Exception as exc:  # noqa: BLE001 - health must answer
            log.warning("cannot read allocations: %s", exc)
            return None

    def close(self) -> None:
        self.judge.drop_workload_state()
