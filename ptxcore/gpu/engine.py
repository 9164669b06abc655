"""The judge: forbidden-source check -> build on the GPU host -> library check -> correctness ->
memcheck gate -> verified timing -> target-instruction check, assembled into a JudgeResult.

`Judge` keeps workload state (inputs and reference outputs on the GPU) and reference latencies between
candidates; the profiling service reuses one Judge per GPU.
"""

from __future__ import annotations

import logging
import threading
import time

from ptxcore.arch import Architecture
from ptxcore.compile import BuildOptions, CompileCache, compile_candidate
from ptxcore.problems import Problem
from ptxcore.schema import (
    CompileStatus,
    Correctness,
    EnvironmentInfo,
    EvaluationStatus,
    JudgeResult,
    Performance,
    StaticTarget,
    TargetInstruction,
    TargetInstructionEvidence,
)

from .cache import JsonCache
from .config import JudgeConfig
from .deps import ElfError, needed_libraries
from .errors import ArchitectureMismatchError, InfraError, NoGPUError
from .measure import Tolerance
from .session import CandidateSession, SessionOutcome, SessionPlan
from .state import WorkloadState
from .tools import ToolChecks

log = logging.getLogger(__name__)


class Judge:
    """Judges candidates on one GPU. Not thread-safe: one judgement at a time (a lock enforces it)."""

    def __init__(self, config: JudgeConfig | None = None) -> None:
        self.config = config or JudgeConfig()
        root = self.config.cache_root()
        self.compile_cache = CompileCache(root / "compile")
        self.ref_cache = JsonCache(root / "reference")
        self.tools = ToolChecks(root, self.config)
        self._states: dict[tuple[str, str], WorkloadState] = {}
        self._lock = threading.Lock()
        self._gpu: dict | None = None

    # ---- GPU-side shared objects -------------------------------------------------------------
    def _init_gpu(self) -> dict:
        if self._gpu is None:
            from . import driver
            from .environment import GpuMonitor, static_environment
            from .l2 import L2Flusher

            if not driver.gpu_available():
                raise NoGPUError("no NVIDIA GPU is available on this machine")
            import torch

            torch.cuda.set_device(self.config.device)
            self._gpu = {"env": static_environment(self.config.device), "monitor": GpuMonitor(self.config.device),
                         "flusher": L2Flusher(self.config.device),
                         "capability": torch.cuda.get_device_capability(self.config.device)}
        return self._gpu

    def workload_state(self, problem: Problem, workload_uuid: str | None) -> WorkloadState:
        uuid = problem.workload(workload_uuid).uuid
        key = (problem.name, uuid)
        if key not in self._states:
            self._states[key] = WorkloadState.build(problem, uuid, self.config.trials)
        return self._states[key]

    def drop_workload_state(self) -> None:
        self._states.clear()

    def tolerance(self, problem: Problem) -> Tolerance:
        t, c = problem.extension.tolerance, self.config
        return Tolerance(c.atol if c.atol is not None else t.atol, c.rtol if c.rtol is not None else t.rtol,
                         c.matched_ratio if c.matched_ratio is not None else t.matched_ratio)

    def plan(self, problem: Problem, mode: str, load: dict, needed: tuple[str, ...] = ()) -> SessionPlan:
        c = self.config
        return SessionPlan(mode, load, c.trials, c.warmup, c.iters, c.permute_inputs, self.tolerance(problem),
                           c.call_timeout_s, c.startup_timeout_s, c.throttle_retries, c.device, needed,
                           enforce_rules=mode == "ffi")

    # ---- the judgement ----------------------------------------------------------------------
    def judge(self, source: str, problem: Problem, arch: Architecture, workload_uuid: str | None = None) -> JudgeResult:
        with self._lock:
            return self._judge(source, problem, arch, workload_uuid)

    def _judge(self, source: str, problem: Problem, arch: Architecture, workload_uuid: str | None) -> JudgeResult:
        from .driver import gpu_available

        if not gpu_available():  # before building: the GPU-host build links libcuda
            raise NoGPUError("no NVIDIA GPU is available on this machine")
        started = time.monotonic()
        uuid = problem.workload(workload_uuid).uuid
        r = _ResultBuilder(problem.name, uuid, arch.key)
        compiled = compile_candidate(source, BuildOptions(arch, timeout_s=self.config.build_timeout_s),
                                     self.compile_cache)
        r.stage("build", time.monotonic() - started)
        r.compile, r.sass = compiled.result, compiled.sass
        if compiled.result.status is CompileStatus.REJECTED:
            return r.finish(EvaluationStatus.REJECTED, compiled.result.reason, started)
        if compiled.result.status is CompileStatus.COMPILE_ERROR:
            return r.finish(EvaluationStatus.COMPILE_ERROR, compiled.result.reason, started, log=compiled.result.log)
        try:
            return self._judge_built(compiled, source, problem, arch, uuid, r, started)
        except InfraError as exc:
            log.error("infrastructure error judging %s: %s", problem.name, exc)
            return r.finish(EvaluationStatus.INFRA_ERROR, str(exc)[:1000], started)

    def _judge_built(self, compiled, source, problem, arch, uuid, r, started) -> JudgeResult:  # noqa: ANN001
        gpu = self._init_gpu()
        r.environment = _environment(gpu["env"])
        _check_arch(arch, gpu["capability"])
        try:
            needed = tuple(needed_libraries(compiled.artifact))
        except (ElfError, OSError) as exc:
            raise InfraError(f"cannot read the built shared object: {exc}") from exc
        t0 = time.monotonic()
        state = self.workload_state(problem, uuid)
        ref = self._reference(state, problem, gpu)
        r.stage("workload_and_reference", time.monotonic() - t0)
        plan = self.plan(problem, "ffi", {"mode": "ffi", "library": str(compiled.artifact)}, needed)
        from .driver import reset_persisting_l2

        reset_persisting_l2()  # nothing a previous candidate left persisting in L2 carries over
        gate = lambda: self.tools.memcheck(compiled, problem, uuid, r)  # noqa: E731
        out = CandidateSession(plan, state, gpu["flusher"], gpu["monitor"]).run(gate if self.config.sanitizer else None)
        self._record_session(r, out, gpu)
        if out.verdict is not None:
            return r.finish(out.verdict.status, out.verdict.reason, started, log=out.log,
                            target=self.tools.static_only(compiled, "the candidate did not pass"))
        r.performance = Performance(latency_ms=out.latency_ms, reference_latency_ms=ref.latency_ms,
                                    speedup_factor=ref.latency_ms / out.latency_ms if out.latency_ms > 0 else 0.0)
        t0 = time.monotonic()
        target = self.tools.evidence(compiled, source, problem, uuid, arch)
        r.stage("ncu", time.monotonic() - t0)
        return r.finish(EvaluationStatus.PASSED, "", started, target=target)

    def _reference(self, state: WorkloadState, problem: Problem, gpu: dict):  # noqa: ANN202
        from .reference import reference_latency

        plan = self.plan(problem, "baseline", {"mode": "baseline", "problem": problem.name})
        env = gpu["env"]
        return reference_latency(state, plan, self.ref_cache, env["gpu_name"], env["driver_version"],
                                 gpu["flusher"], gpu["monitor"])

    def _record_session(self, r: _ResultBuilder, out: SessionOutcome, gpu: dict) -> None:
        for k, v in out.stage_seconds.items():
            r.stage(k, v)
        r.stage("kernel", out.kernel_seconds)
        r.correctness = _correctness(out)
        clocks = [t.clocks_mhz for t in out.trials]
        temps = [t.temps_c for t in out.trials]
        reasons = sorted({x for t in out.trials for x in t.throttle_reasons})
        extra = dict(r.environment.extra)
        if out.env_streams:
            extra["env_stream_ids"] = ",".join(map(str, out.env_streams))
        extra["trial_medians_ms"] = ",".join(f"{t.median_ms:.5f}" for t in out.trials)
        extra["persisting_l2_resets"] = str(out.l2_resets)
        r.environment = r.environment.model_copy(update={
            "sm_clock_mhz_before": clocks[0][0] if clocks else 0, "sm_clock_mhz_after": clocks[-1][1] if clocks else 0,
            "temperature_c_before": temps[0][0] if temps else 0, "temperature_c_after": temps[-1][1] if temps else 0,
            "throttle_reasons": reasons, "extra": extra})


def _check_arch(arch: Architecture, capability: tuple[int, int]) -> None:
    want = arch.sm.removeprefix("sm_").rstrip("a")
    have = f"{capability[0]}{capability[1]}"
    if want != have:
        raise ArchitectureMismatchError(
            f"candidate targets {arch.sm} ({arch.key}) but this GPU is sm_{have}: it needs a {arch.key} host")


def _environment(env: dict) -> EnvironmentInfo:
    return EnvironmentInfo(
        gpu_name=env["gpu_name"], driver_version=env["driver_version"], cuda_toolkit=env["cuda_toolkit"],
        torch_version=env["torch_version"],
        extra={k: env[k] for k in ("cupy", "tvm_ffi", "cuda_driver_api") if env.get(k)},
    )


def _correctness(out: SessionOutcome) -> Correctness | None:
    checked = [r for r in out.correctness if r.stats is not None]
    if not checked:
        return None
    s = checked[0].stats
    for rec in checked[1:]:
        s = s.merge(rec.stats)
    timed = [r for r in out.timed if r.stats is not None]
    extra = {"trials": len(checked), "matched_ratio": s.matched_ratio, "allclose": s.allclose,
             "mismatched": s.mismatched, "numel": s.numel, "nan_count": s.nan_count, "inf_count": s.inf_count,
             "timed_calls_verified": len(timed),
             "timed_calls_passed": sum(1 for r in timed if r.stats.mismatched == 0 and r.stats.nan_count == 0)}
    return Correctness(max_relative_error=s.max_rel_error, max_absolute_error=s.max_abs_error, extra=extra)


class _ResultBuilder:
    """Collects the pieces of a JudgeResult while the stages run."""

    def __init__(self, definition: str, workload: str, arch: str) -> None:
        self.definition, self.workload, self.arch = definition, workload, arch
        self.compile = self.sass = self.correctness = self.performance = self.sanitizer = None
        self.environment = EnvironmentInfo()
        self.stages: dict[str, float] = {}

    def stage(self, name: str, seconds: float) -> None:
        self.stages[name] = round(self.stages.get(name, 0.0) + seconds, 6)

    def finish(self, status: EvaluationStatus, reason: str, started: float, log: str = "",
               target: TargetInstructionEvidence | None = None) -> JudgeResult:
        self.stage("total", time.monotonic() - started)
        if target is None:
            static = self.sass.target_static if self.sass is not None else None
            target = TargetInstructionEvidence(
                status=TargetInstruction.ABSENT if static is StaticTarget.ABSENT else TargetInstruction.UNKNOWN,
                static=static, reason="not executed: the candidate was not run to completion")
        return JudgeResult(
            status=status, reason=reason, definition=self.definition, workload_uuid=self.workload, arch=self.arch,
            correctness=self.correctness, performance=self.performance if status is EvaluationStatus.PASSED else None,
            sanitizer=self.sanitizer, target_instruction=target, compile=self.compile, sass=self.sass,
            environment=self.environment, stage_seconds=self.stages, log=log[-4000:],
        )


_DEFAULT: dict[str, Judge] = {}


def default_engine(config: JudgeConfig | None = None) -> Judge:
    """One Judge per configuration per process (workload state and caches are reused)."""
    cfg = config or JudgeConfig()
    key = cfg.model_dump_json()
    if key not in _DEFAULT:
        _DEFAULT[key] = Judge(cfg)
    return _DEFAULT[key]
