"""The judge: build (or reuse the CPU stage's) -> correctness -> memcheck beside the counting run -> verified,
metered timing -> the kernel-set check of the counts, assembled into a JudgeResult.

One judge for both languages: a Triton candidate (`language=triton`) is validated again here (the CPU stage's
rules), written into a private workspace with its own Triton cache (never imported in this process), and judged
by the same session in the child's mode triton: same correctness, memcheck and CUPTI timing, the foreign-kernel
rule instead of the mapped-library rule, evidence from the cubins its calls launched (pipeline.triton).

`GpuJudge` keeps workload state (inputs and reference outputs on the GPU) and reference latencies between
candidates; the profiling service runs one per GPU and calls its public stage methods (`judge`, ...).
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ptxcore.arch import Architecture
from ptxcore.compile import BuildOptions, CompileCache, CompiledCandidate, build_candidate, compile_candidate
from ptxcore.compile.cache import file_sha256
from ptxcore.gpu.config import JudgeConfig
from ptxcore.gpu.errors import ArchitectureMismatchError, InfraError, NoGPUError
from ptxcore.gpu.harness.calls import Tolerance
from ptxcore.gpu.harness.deps import ElfError, needed_libraries
from ptxcore.gpu.harness.sharing import shared_gpu
from ptxcore.gpu.harness.state import WorkloadState
from ptxcore.gpu.harness.triton import TritonFiles
from ptxcore.gpu.harness.waiting import WaitingSession
from ptxcore.gpu.messages import SessionMode
from ptxcore.gpu.pipeline.caches import JsonCache
from ptxcore.gpu.pipeline.cleanup import DeferredClose
from ptxcore.gpu.pipeline.overlap import ToolsBeforeTiming
from ptxcore.gpu.pipeline.result import ResultBuilder, record_performance, record_session
from ptxcore.gpu.pipeline.session import CandidateSession, SessionOutcome, SessionPlan
from ptxcore.gpu.pipeline.tools import ToolStages
from ptxcore.gpu.pipeline.triton import (
    NOT_PASSED,
    not_profiled,
    triton_evidence,
    triton_memcheck,
    triton_profile_only,
    triton_sanitize_only,
)
from ptxcore.gpu.pipeline.verdicts import FORGED_TIMING, Verdict
from ptxcore.gpu.probe import gpu_available
from ptxcore.problems import Problem
from ptxcore.schema import (
    CompileStatus,
    EnvironmentInfo,
    EvaluationStatus,
    JudgeResult,
    Language,
    TargetInstructionEvidence,
    text_sha256,
)

if TYPE_CHECKING:
    from ptxcore.gpu.harness.l2 import L2Flusher
    from ptxcore.gpu.harness.meter import DeviceMeter
    from ptxcore.gpu.harness.monitor import GpuMonitor
    from ptxcore.gpu.pipeline.reference import ReferenceTiming

log = logging.getLogger(__name__)

BASELINE_CALL_TIMEOUT_S = 600.0
"""Deadline of one baseline call: its first may build kernels (FlashInfer's JIT: 96 s on the H200)."""


@dataclass
class GpuContext:
    """What the judge holds on its GPU between candidates (created on first use)."""

    env: dict[str, str]
    monitor: GpuMonitor
    flusher: L2Flusher
    capability: tuple[int, int]
    meter: DeviceMeter | None = None
    """The judge's device meter (None: configured off, or not available: see meter_error)."""
    meter_error: str | None = None
    """Why there is no meter although one is configured (every candidate is then INFRA_ERROR)."""

    def environment(self, baseline: tuple[str, str | None] | None = None) -> EnvironmentInfo:
        """The verdict's environment; `baseline`: (library, version) of the problem's baseline (recorded as
        `baseline:<library>`, "not installed" when absent)."""
        e = self.env
        versions = {k: e[k] for k in ("cupy", "tvm_ffi", "cuda_driver_api") if e.get(k)}
        if baseline is not None:
            versions[f"baseline:{baseline[0]}"] = baseline[1] or "not installed"
        return EnvironmentInfo(
            gpu_name=e["gpu_name"] or None, driver_version=e["driver_version"] or None,
            cuda_toolkit=e["cuda_toolkit"] or None, torch_version=e["torch_version"] or None,
            library_versions=versions)


class GpuJudge:
    """Judges candidates on one GPU. Not thread-safe: one judgement at a time (a lock enforces it)."""

    def __init__(self, config: JudgeConfig | None = None) -> None:
        self.config = config or JudgeConfig()
        root = self.config.cache_root()
        self.compile_cache = CompileCache(root / "compile")
        self.ref_cache = JsonCache(root / "reference")
        self.tools = ToolStages(root, self.config)
        self.waiting = WaitingSession(self.config.device, enabled=self.config.prestart_child)
        self._closing = DeferredClose()
        self._states: dict[tuple[str, str], WorkloadState] = {}
        self._lock = threading.Lock()
        self._gpu: GpuContext | None = None
        self._baselines: dict[str, tuple[str, str | None]] = {}

    # ---- GPU-side shared objects -------------------------------------------------------------
    def gpu(self) -> GpuContext:
        """The GPU context (NoGPUError on a machine without one)."""
        if self._gpu is None:
            from ptxcore.gpu.harness.l2 import L2Flusher
            from ptxcore.gpu.harness.meter import device_meter
            from ptxcore.gpu.harness.monitor import GpuMonitor, static_environment

            if not gpu_available():
                raise NoGPUError("no NVIDIA GPU is available on this machine")
            import torch

            torch.cuda.set_device(self.config.device)
            self._gpu = GpuContext(static_environment(self.config.device), GpuMonitor(self.config.device),
                                   L2Flusher(self.config.device), torch.cuda.get_device_capability(self.config.device))
            if self.config.meter:
                self._gpu.meter, self._gpu.meter_error = device_meter(self.config.device)
        return self._gpu

    def _meter_for(self, gpu: GpuContext, candidate: bool) -> DeviceMeter | None:
        """The meter of a session: a candidate's session without one (configured but unavailable) cannot be
        audited, so it is INFRA_ERROR rather than a verdict the judge could not check."""
        if gpu.meter is None and gpu.meter_error is not None and candidate:
            raise InfraError(f"the judge's device meter is not available: {gpu.meter_error}")
        return gpu.meter

    def monitor_physical_gpu(self, index: int) -> None:
        """NVML ignores CUDA_VISIBLE_DEVICES: a service worker pinned to one GPU reads it by its host index."""
        from ptxcore.gpu.harness.monitor import GpuMonitor

        gpu = self.gpu()
        if getattr(gpu.monitor, "device", None) != index:
            gpu.monitor = GpuMonitor(index)

    def workload_state(self, problem: Problem, workload_uuid: str | None) -> WorkloadState:
        uuid = problem.workload(workload_uuid).uuid
        key = (problem.name, uuid)
        if key not in self._states:
            self._states[key] = WorkloadState.build(problem, uuid, self.config.trials)
        return self._states[key]

    def drop_workload_state(self) -> None:
        self._states.clear()

    def resident_bytes(self) -> dict[str, int]:
        """Device bytes of each resident workload state (inputs and references of every trial)."""
        return {f"{name}/{uuid}": state.bytes_on_gpu for (name, uuid), state in self._states.items()}

    def _baseline_version(self, problem: Problem) -> tuple[str, str | None]:
        from ptxcore.gpu.harness.baselines import baseline_version

        if problem.name not in self._baselines:
            self._baselines[problem.name] = baseline_version(problem)
        return self._baselines[problem.name]

    def warm(self, problem: Problem) -> ReferenceTiming:
        """The problem's default workload state and reference latency, ahead of any candidate."""
        with self._lock:
            self._closing.wait()
            gpu = self.gpu()
            self.tools.prestart()
            ref = self._reference(self.workload_state(problem, None), problem, gpu)
            self.waiting.fill()  # after the reference's timing: a child starting takes a CUDA context
            return ref

    def use_reference_cache(self, root: Path) -> None:
        """Time references into (and read them from) another cache directory."""
        self.ref_cache = JsonCache(root)

    def tolerance(self, problem: Problem) -> Tolerance:
        t, c = problem.extension.tolerance, self.config
        return Tolerance(c.atol if c.atol is not None else t.atol, c.rtol if c.rtol is not None else t.rtol,
                         c.matched_ratio if c.matched_ratio is not None else t.matched_ratio)

    def plan(self, problem: Problem, mode: SessionMode, load: dict, needed: tuple[str, ...] = (),
             candidate: Path | TritonFiles | None = None) -> SessionPlan:
        c = self.config
        return SessionPlan(mode=mode, load=load, trials=c.trials, warmup=c.warmup, iters=c.iters,
                           permute=c.permute_inputs, tol=self.tolerance(problem), call_timeout_s=c.call_timeout_s,
                           startup_timeout_s=c.startup_timeout_s, throttle_retries=c.throttle_retries,
                           device=c.device, needed=needed, candidate=candidate,
                           claim_fraction=c.meter_claim_fraction, allowance_extra_us=c.meter_allowance_us,
                           overhead_bound_ms=c.meter_overhead_bound_us / 1e3,
                           meter_samples_per_call=c.meter_samples_per_call)

    # ---- the build -------------------------------------------------------------------------
    def build(self, source: str, arch: Architecture, compiled: CompiledCandidate | None = None,
              language: Language | str = Language.CUDA) -> CompiledCandidate:
        """The CPU stage's build when it verifies (same source, artifact file hash as recorded), else a build
        through this judge's content-addressed cache (a hit when the CPU stage used the same cache). Triton: the
        validator runs again (never trusting a CPU stage's result), nothing is built here."""
        if Language(language) is not Language.CUDA:
            return build_candidate(source, BuildOptions(arch), language=language)
        if compiled is not None and _reusable(compiled, source):
            return compiled
        if compiled is not None:
            log.warning("not reusing the given build of %s: its artifact is missing or does not verify",
                        compiled.result.source_sha256[:12])
        return compile_candidate(source, BuildOptions(arch, timeout_s=self.config.build_timeout_s), self.compile_cache)

    def _built(self, source: str, problem: Problem, arch: Architecture, *, compiled: CompiledCandidate | None,
               workload_uuid: str | None, language: Language | str,
               ) -> tuple[ResultBuilder, CompiledCandidate | None, JudgeResult | None]:
        """(builder, build, early result): the early result is the verdict of a kernel that did not build. The
        entry points' preamble (under the judge's lock), its arguments by keyword in the judge port's order."""
        if not gpu_available():
            raise NoGPUError("no NVIDIA GPU is available on this machine")
        r = ResultBuilder(problem.name, problem.workload(workload_uuid).uuid, arch.key)
        t0 = time.monotonic()
        built = self.build(source, arch, compiled, language)
        r.stage("build", time.monotonic() - t0)
        r.compile, r.sass = built.result, built.sass
        verdict = built.result.verdict
        if verdict is not None:
            log_text = built.result.log if verdict is EvaluationStatus.COMPILE_ERROR else ""
            return r, None, r.finish(verdict, built.result.reason, log=log_text)
        return r, built, None

    # ---- the judgement ----------------------------------------------------------------------
    def judge(self, source: str, problem: Problem, arch: Architecture, *, compiled: CompiledCandidate | None = None,
              workload_uuid: str | None = None, language: Language | str = Language.CUDA) -> JudgeResult:
        with self._lock, self._prestarting(language):
            if Language(language) is not Language.CUDA:
                self.waiting.close()  # it would wait beside this candidate's timing; the next CUDA one starts one
            elif self._prepares_tools():  # while it builds; a reference timed for it closes them first
                self.tools.prepare_ahead(problem, problem.workload(workload_uuid).uuid)
            r, built, early = self._built(source, problem, arch, compiled=compiled, workload_uuid=workload_uuid,
                                           language=language)
            if early is not None:
                return early
            stages = self._judge_triton if Language(language) is Language.TRITON else self._judge_built
            try:
                self._settle(r)
                return stages(built, source, problem, arch, r)
            except InfraError as exc:
                log.error("infrastructure error judging %s: %s", problem.name, exc)
                return r.finish(EvaluationStatus.INFRA_ERROR, str(exc)[:1000])

    @contextlib.contextmanager
    def _prestarting(self, language: Language | str) -> Iterator[None]:
        """A TVM-FFI candidate's judgement with its tool runs started ahead (they start while it builds, or
        were started at the end of the last one), and the next candidate's started when it ends. Nothing on a host
        without a GPU (the judgement ends with NoGPUError there)."""
        cuda = Language(language) is Language.CUDA and gpu_available()
        if cuda:
            self._prestart()
        try:
            yield
        finally:
            self.tools.release_prepared()  # a candidate that did not reach its tool stage leaves them prepared
            if cuda:
                self._prestart()

    def _prepares_tools(self) -> bool:
        """Whether tool runs are prepared (JudgeConfig.prepare_tools, with overlapped and prestarted tools) on a
        host with a GPU."""
        c = self.config
        return c.prepare_tools and c.overlap_tools and c.prestart_tools and gpu_available()

    def _before_reference_timing(self) -> None:
        """A baseline is timed with no other process of the judge's on the GPU: the waiting child and any tool
        run prepared for the candidate end first."""
        self.waiting.close()
        self.tools.release_prepared()

    def _prestart(self) -> None:
        """The next candidate's tool runs and session child, started (not waited for)."""
        self.tools.prestart()
        self.waiting.fill()

    def waiting_pids(self) -> set[int]:
        """Host PIDs of the judge's own processes that wait for its next candidate (tool runs, session child)."""
        return self.tools.prestarted.pids() | self.waiting.pids()

    def settle(self) -> float:
        """Wait for the last session's close handed off after its verdict (defer_session_close); seconds waited.
        InfraError when that close failed. Every judgement does it before its GPU work."""
        return self._closing.wait()

    def _settle(self, r: ResultBuilder) -> None:
        """settle() before this judgement's GPU work (its build overlapped the close), as stage `close_wait`."""
        r.stage("close_wait", self.settle())

    def close(self) -> None:
        """End what the judge keeps running between candidates (the prestarted tool runs, the waiting child, a
        session's close still running)."""
        try:
            self._closing.wait()
        except InfraError as exc:
            log.error("%s", exc)
        self.tools.release_prepared()
        self.tools.prestarted.close()
        self.waiting.close()

    def _gpu_for(self, problem: Problem, arch: Architecture, r: ResultBuilder) -> GpuContext:
        gpu = self.gpu()
        r.environment = gpu.environment(self._baseline_version(problem))
        _check_arch(arch, gpu.capability)
        return gpu

    def _workload(self, problem: Problem, gpu: GpuContext, r: ResultBuilder) -> tuple[WorkloadState, ReferenceTiming]:
        """(workload state, reference latency) of the judgement's workload."""
        t0 = time.monotonic()
        state = self.workload_state(problem, r.workload)
        ref = self._reference(state, problem, gpu)
        r.stage("workload_and_reference", time.monotonic() - t0)
        return state, ref

    def _judge_built(self, compiled: CompiledCandidate, source: str, problem: Problem, arch: Architecture,
                     r: ResultBuilder) -> JudgeResult:
        t0 = time.monotonic()
        gpu = self._gpu_for(problem, arch, r)
        try:
            needed = tuple(needed_libraries(compiled.artifact))
        except (ElfError, OSError) as exc:
            raise InfraError(f"cannot read the built shared object: {exc}") from exc
        r.stage("prepare", time.monotonic() - t0)
        state, ref = self._workload(problem, gpu, r)
        if self._prepares_tools():  # after any reference timing: the runs prepared for this build's stages
            t0 = time.monotonic()
            self.tools.prepare(compiled, problem, r.workload)
            r.stage("tools_prepare", time.monotonic() - t0)
        plan = self.plan(problem, SessionMode.FFI, {"library": str(compiled.artifact)}, needed,
                         candidate=compiled.artifact)
        return self._run_session(
            r, gpu, arch, plan, state, ref,
            gate=lambda out: self.tools.memcheck(compiled, problem, r.workload, r),
            evidence=lambda out: self.tools.evidence(compiled, source, problem, r.workload, arch),
            failed_target=lambda: self.tools.static_only(compiled, "the candidate did not pass"))

    def _judge_triton(self, checked: CompiledCandidate, source: str, problem: Problem, arch: Architecture,
                      r: ResultBuilder) -> JudgeResult:
        """A validated Triton kernel.py: the session in mode triton on a private workspace, then its evidence
        (memcheck and ncu take the kernels the session's first calls launched)."""
        gpu = self._gpu_for(problem, arch, r)
        state, ref = self._workload(problem, gpu, r)
        sha = checked.result.source_sha256
        with TritonFiles.create(source) as files:
            plan = self.plan(problem, SessionMode.TRITON, files.load_message(), candidate=files)
            return self._run_session(
                r, gpu, arch, plan, state, ref,
                gate=lambda out: triton_memcheck(self.tools, files, out.launches, sha, problem, r.workload, r),
                evidence=lambda out: triton_evidence(self.tools, files, out.launches, sha, problem, r.workload, arch,
                                                     r),
                failed_target=lambda: not_profiled(NOT_PASSED))

    def _run_session(self, r: ResultBuilder, gpu: GpuContext, arch: Architecture, plan: SessionPlan,
                     state: WorkloadState, ref: ReferenceTiming, gate: Callable[[SessionOutcome], Verdict | None],
                     evidence: Callable[[SessionOutcome], TargetInstructionEvidence],
                     failed_target: Callable[[], TargetInstructionEvidence]) -> JudgeResult:
        """The stages every candidate goes through once built: its session (correctness, the memcheck `gate` with
        the target `evidence` counted beside it, audited timing), then, for a correct one, its performance and the
        kernel-set check of that evidence."""
        from ptxcore.gpu.child.driver import reset_persisting_l2

        reset_persisting_l2()  # nothing a previous candidate left persisting in L2 carries over
        plan = dataclasses.replace(plan, call_overhead_ms=ref.call_overhead_ms)  # the baseline's own, trusted
        deferred = self.config.defer_session_close and plan.mode is SessionMode.FFI  # Triton's files go at the end
        session = CandidateSession(plan, state, gpu.flusher, gpu.monitor, self._meter_for(gpu, True),
                                   waiting=self.waiting, defer_close=self._closing.submit if deferred else None)
        tools = ToolsBeforeTiming(gate if self.config.sanitizer else None, evidence, r,
                                  overlap=self.config.overlap_tools, after=self.tools.release_prepared)
        t0 = time.monotonic()
        out = session.run((lambda: tools(session.out)) if tools.active else None)
        r.stage("session", time.monotonic() - t0)
        r.verdict_started = time.monotonic()  # the stage `verdict`: from here to the record
        if out.verdict is not None and out.verdict.reason.startswith(FORGED_TIMING):
            shared_gpu(out.verdict.reason, gpu.monitor.compute_pids)  # InfraError when others held the GPU
        record_session(r, out)
        if out.verdict is not None:
            if out.verdict.status is EvaluationStatus.COMPILE_ERROR:
                r.correctness = None  # a later Triton specialisation failed to compile: the verdict is that
            return r.finish(out.verdict.status, out.verdict.reason, log=out.log, target=failed_target())
        record_performance(r, out, ref)
        target = tools.target(out)
        verdict = self._counted_is_timed(plan, out, target, arch)
        target = self._carry_checked(target, out, arch)
        if verdict is not None:
            r.performance = None  # only a PASSED result carries performance
            return r.finish(verdict.status, verdict.reason, log=out.log, target=target)
        return r.finish(EvaluationStatus.PASSED, "", target=target)

    def _counted_is_timed(self, plan: SessionPlan, out: SessionOutcome, target: TargetInstructionEvidence,
                          arch: Architecture) -> Verdict | None:
        """Issue 25: the kernels ncu counted must be those the timed calls ran, and the timed calls' metered
        tensor-pipe time must be within the tensor-time slack of what the counted target FLOPs need (REWARD_HACK
        otherwise; the slack's calibration on the H200 is in targetwork.TENSOR_TIME_SLACK)."""
        from ptxcore.gpu.pipeline.targetwork import kernel_set_verdict, tensor_time_verdict

        only = out.launches.get("kernels") if plan.mode is SessionMode.TRITON else None
        verdict = kernel_set_verdict(target, [rec.timing for rec in out.timed if rec.timing is not None], only=only)
        if verdict is not None and verdict.status is EvaluationStatus.INFRA_ERROR:
            raise InfraError(verdict.reason)
        return verdict or tensor_time_verdict(target, out.audit, arch)

    @staticmethod
    def _carry_checked(target: TargetInstructionEvidence, out: SessionOutcome,
                       arch: Architecture) -> TargetInstructionEvidence:
        """A carries verdict the tensor-time rule could not check is withheld (targetwork.unmetered_carry)."""
        from ptxcore.gpu.pipeline.targetwork import unmetered_carry

        return unmetered_carry(target, out.audit, arch)

    def _reference(self, state: WorkloadState, problem: Problem, gpu: GpuContext) -> ReferenceTiming:
        from ptxcore.gpu.pipeline.reference import reference_latency

        plan = self.plan(problem, SessionMode.BASELINE, {"problem": problem.name})
        plan = dataclasses.replace(plan, call_timeout_s=max(plan.call_timeout_s, BASELINE_CALL_TIMEOUT_S))
        return reference_latency(state, plan, self.ref_cache, gpu.env["gpu_name"], gpu.env["driver_version"],
                                 gpu.flusher, gpu.monitor, gpu.meter, before_timing=self._before_reference_timing)

    # ---- tool-only stages (the profiling service's /sanitize and /profile) --------------------
    def sanitize_only(self, source: str, problem: Problem, arch: Architecture, *,
                      compiled: CompiledCandidate | None = None, workload_uuid: str | None = None,
                      language: Language | str = Language.CUDA) -> JudgeResult:
        """The memcheck gate alone: SANITIZE_CLEAN, or the verdict memcheck reached."""
        with self._lock, self._prestarting(language):
            r, built, early = self._built(source, problem, arch, compiled=compiled, workload_uuid=workload_uuid,
                                           language=language)
            if early is not None:
                return early
            self._settle(r)
            if Language(language) is Language.TRITON:
                verdict = triton_sanitize_only(self.tools, source, built.result.source_sha256, problem, r.workload, r)
            else:
                verdict = self.tools.memcheck(built, problem, r.workload, r)
            if verdict is not None:
                return r.finish(verdict.status, verdict.reason)
            return r.finish(EvaluationStatus.SANITIZE_CLEAN, "sanitize only: memcheck clean; correctness not judged")

    def profile_only(self, source: str, problem: Problem, arch: Architecture, *,
                     compiled: CompiledCandidate | None = None, workload_uuid: str | None = None,
                     language: Language | str = Language.CUDA) -> JudgeResult:
        """The target-instruction check alone (ncu failure: unknown): PROFILED."""
        with self._lock, self._prestarting(language):
            r, built, early = self._built(source, problem, arch, compiled=compiled, workload_uuid=workload_uuid,
                                           language=language)
            if early is not None:
                return early
            self._settle(r)
            if Language(language) is Language.TRITON:
                target = triton_profile_only(self.tools, source, built.result.source_sha256, problem, r.workload,
                                             arch, r)
            else:
                target = self.tools.evidence(built, source, problem, r.workload, arch)
            return r.finish(EvaluationStatus.PROFILED, "profile only: target-instruction check; correctness not "
                            "judged", target=target)


def _reusable(compiled: CompiledCandidate, source: str) -> bool:
    res = compiled.result
    if res.status is not CompileStatus.COMPILED or res.source_sha256 != text_sha256(source):
        return False
    art = compiled.artifact
    if art is None or not Path(art).is_file() or res.artifact_sha256 is None:
        return False
    return file_sha256(Path(art)) == res.artifact_sha256


def _check_arch(arch: Architecture, capability: tuple[int, int]) -> None:
    if tuple(capability) != arch.compute_capability:
        have = f"sm_{capability[0]}{capability[1]}"
        raise ArchitectureMismatchError(
            f"candidate targets {arch.sm} ({arch.key}) but this GPU is {have}: it needs a {arch.key} host")


_DEFAULT: dict[str, GpuJudge] = {}


def default_judge(config: JudgeConfig | None = None) -> GpuJudge:
    """One GpuJudge per configuration per process (workload state and caches are reused)."""
    cfg = config or JudgeConfig()
    key = cfg.model_dump_json()
    if key not in _DEFAULT:
        _DEFAULT[key] = GpuJudge(cfg)
    return _DEFAULT[key]
