"""FakeRunner: a stand-in for the GPU judge, for CPU tests and `--fake` benchmark runs. It is not a
judge: it sleeps for configured times and returns verdicts chosen by markers in the candidate text.

Markers (anywhere in the source, e.g. in a comment): FAKE:wrong, FAKE:compile, FAKE:hang (hangs in
candidate code), FAKE:harness-hang, FAKE:segv, FAKE:exit, FAKE:raise (runner exception), FAKE:infra
(INFRA_ERROR verdict), FAKE:throttle (judge saw thermal slowdown while timing), FAKE:leak=MIB,
FAKE:sleep=S (candidate time). Health comes from `<control_dir>/gpu<N>.json` when present (a test
heats a GPU by writing {"temperature_c": 95} there); the phase it announces last is written to
`<control_dir>/gpu<N>.phase`, for a test that must act while "candidate code" runs (it waits on the file,
not on a guessed time).
"""

from __future__ import annotations

import json
import os
import re
import signal
import time
from collections import OrderedDict
from pathlib import Path

from ptxcore.gpu.service.memory import memory_need
from ptxcore.gpu.service.models import GpuHealth, TaskKind, WorkItem
from ptxcore.gpu.service.runner import Phase, PhaseCallback
from ptxcore.problems import get_problem
from ptxcore.schema import (
    EnvironmentInfo,
    EvaluationStatus,
    JudgeCorrectness,
    JudgeResult,
    Performance,
    SanitizerSummary,
    TargetInstruction,
    TargetInstructionEvidence,
)

_MARKER = re.compile(r"FAKE:([a-z][a-z-]*)(?:=([0-9.]+))?")
GIB = 1 << 30



_CLEAN = {TaskKind.EVALUATE: EvaluationStatus.PASSED, TaskKind.SANITIZE: EvaluationStatus.SANITIZE_CLEAN,
          TaskKind.PROFILE: EvaluationStatus.PROFILED}
"""What a task with nothing wrong ends as: only /evaluate judges correctness."""

class FakeRunner:
    """Simulated costs: `state_build_s` to build a workload state (inputs, reference outputs, reference
    timing), `eval_s` per candidate. With cache_state the state stays resident between candidates."""

    def __init__(self, gpu: int, work_dir: Path, eval_s: float = 0.05, state_build_s: float = 0.2,
                 cache_state: bool = True, total_gib: float = 80.0, control_dir: str | None = None) -> None:
        self.gpu, self.eval_s, self.state_build_s, self.cache_state = gpu, eval_s, state_build_s, cache_state
        self.total_bytes = int(total_gib * GIB)
        self.control = Path(control_dir) / f"gpu{gpu}.json" if control_dir else None
        self.phase_file = Path(control_dir) / f"gpu{gpu}.phase" if control_dir else None
        self.resident: OrderedDict[str, int] = OrderedDict()
        self.leaked = 0

    def run(self, item: WorkItem, phase: PhaseCallback) -> JudgeResult:
        marks = {m.group(1): m.group(2) for m in _MARKER.finditer(item.source)}
        if "harness-hang" in marks:
            time.sleep(1e6)
        if "raise" in marks:
            raise RuntimeError("fake runner failure")
        if "infra" in marks:
            return self._result(item, EvaluationStatus.INFRA_ERROR, "fake infrastructure error", {})
        stages = {"state": self._ensure_state(item)}
        self._announce(phase, Phase.CANDIDATE)
        if "hang" in marks:
            time.sleep(1e6)
        if "segv" in marks:
            os.kill(os.getpid(), signal.SIGSEGV)
        if "exit" in marks:
            os._exit(3)
        t0 = time.perf_counter()
        time.sleep(float(marks.get("sleep") or self.eval_s))
        stages["candidate"] = time.perf_counter() - t0
        self._announce(phase, Phase.HARNESS)
        if "leak" in marks:
            self.leaked += int(float(marks["leak"] or 0) * (1 << 20))
        status = (EvaluationStatus.INCORRECT_NUMERICAL if "wrong" in marks else
                  EvaluationStatus.COMPILE_ERROR if "compile" in marks else _CLEAN[item.kind])
        return self._result(item, status, "" if status.is_correct else f"fake {status.value}", stages,
                            throttled="throttle" in marks)

    def _announce(self, phase: PhaseCallback, now: Phase) -> None:
        phase(now)
        if self.phase_file is not None:
            self.phase_file.write_text(now.value)

    def _ensure_state(self, item: WorkItem) -> float:
        need = memory_need(get_problem(item.definition), item.workload_uuid or None)
        if self.cache_state and need.state_key in self.resident:
            self.resident.move_to_end(need.state_key)
            return 0.0
        time.sleep(self.state_build_s)
        if self.cache_state:
            self.resident[need.state_key] = need.state_bytes
            while sum(self.resident.values()) > self.total_bytes // 2 and len(self.resident) > 1:
                self.resident.popitem(last=False)
        return self.state_build_s

    def _result(self, item: WorkItem, status: EvaluationStatus, reason: str, stages: dict[str, float],
                throttled: bool = False) -> JudgeResult:
        seed = int(item.source_sha256[:4], 16)
        latency = 1.0 + (seed % 100) / 100
        passed = status is EvaluationStatus.PASSED
        return JudgeResult(
            status=status, reason=reason, definition=item.definition, workload_uuid=item.workload_uuid,
            arch=item.arch,
            correctness=JudgeCorrectness(max_absolute_error=0.0 if passed else 1.5, max_relative_error=0.0 if passed else 3.0)
            if status in (EvaluationStatus.PASSED, EvaluationStatus.INCORRECT_NUMERICAL) else None,
            performance=Performance(latency_ms=latency, reference_latency_ms=1.0, speedup_factor=1.0 / latency)
            if passed else None,
            sanitizer=SanitizerSummary(ran=1, errors=0) if item.kind is not TaskKind.PROFILE else None,
            target_instruction=TargetInstructionEvidence(status=TargetInstruction.UNKNOWN, tool="fake",
                                                         source_sha256=item.source_sha256),
            environment=EnvironmentInfo(gpu_name="FAKE GPU (no judge ran)",
                                        throttle_reasons=["hw_thermal_slowdown"] if throttled else [],
                                        library_versions={"ptxbench-fake-runner": f"gpu {self.gpu}, pid {os.getpid()}"}),
            stage_seconds=stages,
        )

    def health(self) -> GpuHealth:
        control = json.loads(self.control.read_text()) if self.control and self.control.exists() else {}
        if control.get("hang_health"):
            time.sleep(1e6)
        resident = sum(self.resident.values())
        base = {
            "gpu": self.gpu, "name": "FAKE GPU", "temperature_c": 40, "sm_clock_mhz": 1980,
            "max_sm_clock_mhz": 1980, "memory_total_bytes": self.total_bytes,
            "memory_free_bytes": self.total_bytes - resident - self.leaked - GIB, "utilization_pct": 0,
            "worker_allocated_bytes": resident + self.leaked, "resident": dict(self.resident),
        }
        base.update({k: v for k, v in control.items() if k in GpuHealth.model_fields})
        return GpuHealth.model_validate(base)

    def close(self) -> None:
        self.resident.clear()
