"""The real engine of a worker process: ptxcore.gpu's Judge, one per GPU, whose workload state
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
import time
from pathlib import Path

from ptxcore.arch import get_architecture
from ptxcore.problems import get_problem
from ptxcore.schema import CompileStatus, EvaluationStatus, JudgeResult

from .engine import PhaseCallback
from .health import read_gpu
from .models import GpuHealth, TaskKind, WorkItem

log = logging.getLogger(__name__)


class JudgeEngine:
    """cache_state=False rebuilds the workload state and re-times the reference for every candidate
    (the 'without cached workload state' arm of benchmarks/service_throughput.py)."""

    def __init__(self, gpu: int, work_dir: Path, cache_state: bool = True, judge_config: dict | None = None) -> None:
        from ptxcore.gpu.config import JudgeConfig
        from ptxcore.gpu.engine import Judge

        self.gpu = gpu
        self.physical = int(os.environ.get("PTXBENCH_PHYSICAL_GPU", gpu))
        self.cache_state = cache_state
        self.work_dir = Path(work_dir)
        self.judge = Judge(JudgeConfig(**{**(judge_config or {}), "device": 0}))
        self._overhead: int | None = None

    # -- judging ---------------------------------------------------------------------------------------

    def run(self, item: WorkItem, phase: PhaseCallback) -> JudgeResult:
        problem, arch = get_problem(item.definition), get_architecture(item.arch)
        self._ensure_monitor()
        if not self.cache_state:
            self.judge.drop_workload_state()
            from ptxcore.gpu.cache import JsonCache

            self.judge.ref_cache = JsonCache(Path(tempfile.mkdtemp(prefix="ref-", dir=self.work_dir)))
        workload = item.workload_uuid or None
        if item.kind is TaskKind.EVALUATE:
            return self.judge.judge(item.source, problem, arch, workload_uuid=workload)
        return self._tool_only(item, problem, arch)

    def _tool_only(self, item: WorkItem, problem, arch) -> JudgeResult:  # noqa: ANN001
        """/sanitize: the memcheck gate alone; /profile: the target-instruction check alone. The status
        speaks for that stage only (PASSED: nothing wrong found by it); correctness is not judged."""
        from ptxcore.compile import BuildOptions, compile_candidate
        from ptxcore.gpu.engine import _ResultBuilder

        uuid = problem.workload(item.workload_uuid or None).uuid
        r = _ResultBuilder(problem.name, uuid, arch.key)
        compiled = compile_candidate(item.source, BuildOptions(arch), self.judge.compile_cache)
        r.compile, r.sass = compiled.result, compiled.sass
        started = time.monotonic()
        if compiled.result.status is not CompileStatus.COMPILED:
            status = (EvaluationStatus.REJECTED if compiled.result.status is CompileStatus.REJECTED
                      else EvaluationStatus.COMPILE_ERROR)
            return r.finish(status, compiled.result.reason, started, log=compiled.result.log)
        if item.kind is TaskKind.SANITIZE:
            verdict = self.judge.tools.memcheck(compiled, problem, uuid, r)
            if verdict is not None:
                return r.finish(verdict.status, verdict.reason, started)
            return r.finish(EvaluationStatus.PASSED, "sanitize only: memcheck clean; correctness not judged", started)
        target = self.judge.tools.evidence(compiled, item.source, problem, uuid, arch)  # ncu failure: unknown
        return r.finish(EvaluationStatus.PASSED, "profile only: target-instruction check; correctness not judged",
                        started, target=target)

    def _ensure_monitor(self) -> None:
        """The judge's GpuMonitor reads NVML by index; point it at this worker's physical GPU."""
        gpu = self.judge._init_gpu()
        if getattr(gpu.get("monitor"), "device", None) != self.physical:
            from ptxcore.gpu.environment import GpuMonitor

            gpu["monitor"] = GpuMonitor(self.physical)

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
        out = {}
        for (name, uuid), state in getattr(self.judge, "_states", {}).items():
            total = 0
            for trial in state.trials:
                for t in list(trial.inputs.values()) + list(trial.references.values()):
                    if hasattr(t, "element_size"):
                        total += t.numel() * t.element_size()
            out[f"{name}/{uuid}"] = total
        return out

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
