"""One child session on one workload: correctness calls, the memcheck gate, verified and audited timed trials.

Used for candidates (mode ffi: a TVM-FFI build; mode triton: a Triton kernel.py) and for the trusted baseline
(mode baseline). Everything the child can do wrong comes back as a Verdict; only our own failures raise
InfraError. Mode triton differs in three places: the first call gets the start-up deadline (Triton compiles in
it), the library rule is the foreign-kernel rule (torch maps cuBLAS/cuDNN into every Triton child), and a Triton
compile error reported by the child is COMPILE_ERROR.

A correctness call that disagrees with the library on a few elements is ruled by float64 on the disputed slices
(pipeline.arbitration, issue 25) before the memcheck gate, while its outputs still lie in the slot.

The latency is the child's claim (its CUPTI spans); the judge's device meter (harness.meter), which runs in this
process, measures the GPU's busy time of the same calls, and a claim far below it is REWARD_HACK
(pipeline.verdicts.measurement_verdict). The meter takes the device's sampler before the candidate's code is
loaded (LOAD; a session child started ahead holds none of it before), so the candidate cannot take it first.
"""

from __future__ import annotations

import logging
import os
import statistics
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from ptxcore.gpu.errors import InfraError
from ptxcore.gpu.harness.audit import allowance_ns, audit_call, trial_audit
from ptxcore.gpu.harness.buffers import SharedSlot
from ptxcore.gpu.harness.calls import (
    CALL_STAGES,
    METER_REPEATS,
    CallDriver,
    CallFailed,
    CallRecord,
    MeteredTrial,
    Tolerance,
    TrialTiming,
    finish_trials,
    measure_trials,
)
from ptxcore.gpu.harness.isolation import ChildDied, ChildForged, ChildProcess, ChildTimeout
from ptxcore.gpu.harness.meter import DeviceMeter, MeterError, choose_interval_ns
from ptxcore.gpu.harness.state import WorkloadState
from ptxcore.gpu.harness.triton import TritonFiles
from ptxcore.gpu.messages import ChildOp, SessionMode
from ptxcore.gpu.pipeline.verdicts import (
    Verdict,
    correctness_verdict,
    foreign_kernel_verdict,
    library_verdict,
    measurement_verdict,
    stream_verdict,
    timing_verdict,
    work_verdict,
)
from ptxcore.schema import Arbitration, EvaluationStatus, MeterStatus, TimingAudit, TrialAudit, exception_line

if TYPE_CHECKING:
    from ptxcore.gpu.harness.l2 import L2Flusher
    from ptxcore.gpu.harness.monitor import GpuMonitor
    from ptxcore.gpu.harness.waiting import WaitingSession

log = logging.getLogger(__name__)


@dataclass
class SessionOutcome:
    verdict: Verdict | None = None
    log: str = ""
    correctness: list[CallRecord] = field(default_factory=list)
    timed: list[CallRecord] = field(default_factory=list)
    latency_ms: float = 0.0
    trials: list[TrialTiming] = field(default_factory=list)
    stage_seconds: dict[str, float] = field(default_factory=dict)
    env_streams: list[int] = field(default_factory=list)
    all_calls: list[CallRecord] = field(default_factory=list)
    l2_resets: int = 0
    launches: dict = field(default_factory=dict)
    """Mode triton: the child's launch report of the recorded first calls (empty otherwise)."""
    audit: TimingAudit | None = None
    """The timed trials' claims against the judge's own measurements (None until timing ran)."""
    arbitrations: list[Arbitration] = field(default_factory=list)
    """Float64 arbitrations of correctness calls that disagreed with the library (pipeline.arbitration)."""
    child_waited: bool = False
    """Whether the session's child was the one started ahead (harness.waiting) rather than a fresh one."""

    @property
    def kernel_seconds(self) -> float:
        """GPU time of every call the judge made (correctness, warm-up, timed, repeated trials)."""
        return sum(r.timing.span_ns for r in self.all_calls if r.timing) / 1e9


@dataclass(frozen=True, kw_only=True)
class SessionPlan:
    mode: SessionMode
    load: dict
    """The LOAD request's arguments (mode ffi: library; triton: source, triton_cache; baseline: problem)."""
    trials: int
    warmup: int
    iters: int
    permute: bool
    tol: Tolerance
    call_timeout_s: float
    startup_timeout_s: float
    throttle_retries: int
    device: int
    needed: tuple[str, ...] = ()
    candidate: Path | TritonFiles | None = None
    """Modes ffi / triton: the built library or the TritonFiles, handed into the child's sandbox."""
    claim_fraction: float = 0.5
    """Measurement rule: a claimed trial median under this fraction of the metered busy median (minus the
    allowance) is REWARD_HACK."""
    allowance_extra_us: float = 0.0
    """Added to the rule's allowance (two sampling intervals + 20 us), us."""
    call_overhead_ms: float = 0.0
    """The harness's own busy time per call on this workload and host (the baseline's audit), taken off the busy
    median before the measurement rule (TimingAudit.call_overhead_ms)."""
    overhead_bound_ms: float = 0.0
    """The most harness busy time per call allowed for before a claim is called forged
    (TimingAudit.overhead_bound_ms; JudgeConfig.meter_overhead_bound_us)."""
    meter_samples_per_call: int = 25
    """The meter's samples per call (JudgeConfig.meter_samples_per_call)."""

    @property
    def enforce_rules(self) -> bool:
        """Stream / library / zero-work / measurement rules: candidates, not the baseline."""
        return self.mode.is_candidate


class CandidateSession:
    """Runs a SessionPlan; `gate` (the memcheck stage) runs between correctness and timing; `meter` is the
    judge's device meter (None: configured off; the audit then says so); `waiting`: the judge's session child
    started ahead (harness.waiting), used by a TVM-FFI candidate's session when one is ready."""

    def __init__(self, plan: SessionPlan, state: WorkloadState, flusher: L2Flusher, monitor: GpuMonitor,
                 meter: DeviceMeter | None = None, waiting: WaitingSession | None = None,
                 defer_close: Callable[[Callable[[], None]], None] | None = None) -> None:
        self.plan, self.state, self.flusher, self.monitor = plan, state, flusher, monitor
        self.meter = meter
        self.waiting = waiting
        self.defer_close = defer_close
        """Given: the session's close is handed to it after the verdict (pipeline.cleanup), not run here."""
        self.out = SessionOutcome()
        self._configured = False

    def run(self, gate: Callable[[], Verdict | None] | None = None) -> SessionOutcome:
        t0 = time.monotonic()
        slots = [SharedSlot.allocate(self.state.spec) for _ in range(self.plan.trials)]
        self.out.stage_seconds["slots"] = time.monotonic() - t0
        child = None
        try:
            started = time.monotonic()
            self._open_meter()
            self.out.stage_seconds["meter_open"] = time.monotonic() - started
            t0 = time.monotonic()
            child = self._child()
            self.out.stage_seconds["child_start"] = time.monotonic() - t0
            self.out.verdict = self._drive(child, slots, gate, started)
        except ChildTimeout as exc:
            self.out.verdict = Verdict(EvaluationStatus.TIMEOUT, str(exc))
            self.out.log = exc.log_tail
        except ChildDied as exc:
            self.out.verdict = Verdict(EvaluationStatus.RUNTIME_ERROR, f"candidate process {exc.exit_text}")
            self.out.log = exc.log_tail
        except ChildForged as exc:
            if not self.plan.enforce_rules:  # the trusted baseline never writes to its pipe: our bug
                raise InfraError(f"baseline session: {exc}") from exc
            self.out.verdict = Verdict(EvaluationStatus.REWARD_HACK, f"forged the judge's channel: {exc}")
            self.out.log = exc.log_tail
        except CallFailed as exc:
            self.out.verdict = self._failed(exc)
            self.out.log = child.log_tail() if child else ""
        finally:
            t0 = time.monotonic()
            if self.defer_close is not None:
                meter = self.meter
                self.defer_close(lambda: _close(child, meter, slots))
            else:
                self.out.stage_seconds.update(_close(child, self.meter, slots))
            self.out.stage_seconds["session_close"] = time.monotonic() - t0
        return self.out

    def _child(self) -> ChildProcess:
        """The session's child: the waiting one with the built library handed in (mode ffi), else a fresh one.
        Either way no code of the candidate has run before LOAD, which comes after the meter took the sampler."""
        p = self.plan
        if self.waiting is not None and p.mode is SessionMode.FFI and isinstance(p.candidate, Path):
            child = self.waiting.take(p.startup_timeout_s)
            if child is not None:
                try:
                    child.hand_in(p.candidate)
                except OSError as exc:
                    child.close(graceful=False)
                    raise InfraError(f"cannot hand the built library to the session child: {exc}") from exc
                except BaseException:
                    child.close(graceful=False)
                    raise
                self.out.child_waited = True
                return child
        return ChildProcess.spawn(p.device, p.mode, p.startup_timeout_s, p.candidate)

    def _open_meter(self) -> None:
        """Take the device's sampler before the candidate's code is loaded. A candidate's session cannot be
        audited without it (InfraError); the baseline's is then simply not audited."""
        if self.meter is None:
            return
        try:
            self.meter.open()
        except MeterError as exc:
            if self.plan.enforce_rules:
                raise InfraError(f"the judge's device meter is not available: {exc}") from exc
            log.warning("baseline timed without the device meter: %s", exc)
            self.meter = None

    def _drive(self, child: ChildProcess, slots: list, gate: Callable[[], Verdict | None] | None,
               started: float) -> Verdict | None:
        reply = child.request(ChildOp.LOAD, child.load_args(self.plan.load), "loading the module",
                              self.plan.startup_timeout_s)
        if not reply.ok:
            raise CallFailed(CallRecord(None, "load", 0, None), reply.error or "load failed", reply.fault)
        runs = self.plan.throttle_retries + METER_REPEATS + 1
        capacity = 2 * len(self.state.spec.outputs) * (self.plan.trials * (1 + (self.plan.warmup + self.plan.iters) * runs))
        first = self.plan.startup_timeout_s if self.plan.mode is SessionMode.TRITON else None
        proto = CallDriver(child, self.state, slots, self.plan.tol, self.flusher, self.plan.call_timeout_s, capacity,
                           first_call_timeout_s=first, meter=self.meter)
        proto.bind()
        self.out.stage_seconds["load"] = time.monotonic() - started - sum(
            self.out.stage_seconds.get(k, 0.0) for k in ("meter_open", "child_start"))
        verdict = self._correctness(child, proto)
        self.out.stage_seconds["correctness"] = time.monotonic() - started
        if verdict is not None:
            return verdict
        if gate is not None:
            t0 = time.monotonic()
            verdict = self._gate_beside_configure(gate)
            self.out.stage_seconds["sanitizer"] = time.monotonic() - t0
            if verdict is not None:
                return verdict
        t0 = time.monotonic()
        verdict = self._timing(child, proto)
        self.out.stage_seconds["timing"] = time.monotonic() - t0
        self.out.all_calls = list(proto.records)
        self.out.stage_seconds.update(proto.host_s)
        self.out.l2_resets = proto.l2_resets
        return verdict

    def _correctness(self, child: ChildProcess, proto: CallDriver) -> Verdict | None:
        recs = [proto.call("correctness", t, 0, None) for t in range(self.plan.trials)]
        proto.collect()
        timings = proto.fetch_timings()
        self.out.correctness, self.out.env_streams = recs, list(timings.env_streams)
        self.out.all_calls = list(recs)
        if self.plan.mode is SessionMode.TRITON:
            self.out.launches = _launch_report(child, self.plan.call_timeout_s)
        verdict = self._rules(child, recs)
        if verdict is not None:
            return verdict
        return correctness_verdict(recs, self.plan.tol, self._arbitrate(recs, proto)) or self._work(recs)

    def _arbitrate(self, recs: list[CallRecord], proto: CallDriver) -> frozenset[int]:
        """Issue 25: a candidate's correctness calls that failed the library comparison, ruled by float64 on the
        disputed slices; the trials ruled exact (their later calls are verified against the corrected reference)."""
        tol = self.plan.tol
        if not self.plan.enforce_rules or all(r.stats is None or r.stats.passes(tol.matched_ratio) for r in recs):
            return frozenset()
        from ptxcore.gpu.pipeline.arbitration import arbitrate_calls

        names = [t.name for t in self.state.spec.outputs]

        def outputs_of(trial: int) -> dict:
            return {n: proto.slots[trial].buffers[n].tensor for n in names}

        t0 = time.monotonic()
        ruled = arbitrate_calls(self.state.problem, recs, outputs_of, self.state.trials, tol)
        log.info("float64 arbitration: %.2f s", time.monotonic() - t0)
        self.out.arbitrations = ruled.arbitrations
        proto.references.update(ruled.references)
        return ruled.exact_trials

    def _gate_beside_configure(self, gate: Callable[[], Verdict | None]) -> Verdict | None:
        """The gate (its tools run in their own processes; none of it times anything) with the meter configured
        beside it, on the interval the correctness calls give: the same configuration `_timing` would make,
        off the critical path. A configuration that fails here is made again, in order, by `_timing`."""
        if self.meter is None:
            return gate()
        failed: list[BaseException] = []

        def configure() -> None:
            try:
                self._configure_meter()
            except (InfraError, MeterError) as exc:  # made again by _timing, whose failure is then the outcome
                failed.append(exc)

        beside = threading.Thread(target=configure, name="meter-configure", daemon=True)
        beside.start()
        try:
            return gate()
        finally:
            beside.join()
            if failed:
                log.warning("the meter's configuration beside the gate failed (made again before timing): %s",
                            failed[0])

    def _configure_meter(self) -> None:
        p, meter = self.plan, self.meter
        if meter is None:
            return
        windows = [r.window.window_ns for r in self.out.correctness if r.window is not None]
        interval = choose_interval_ns(statistics.median(windows) if windows else 1e6, p.warmup + p.iters,
                                      per_call=p.meter_samples_per_call)
        t0 = time.monotonic()
        _meter_call(meter.configure, interval)
        self.out.stage_seconds["meter_configure"] = time.monotonic() - t0
        self._configured = True

    def _timing(self, child: ChildProcess, proto: CallDriver) -> Verdict | None:
        p = self.plan
        if not self._configured:
            self._configure_meter()
        calls_before = sum(proto.host_s[k] for k in CALL_STAGES)
        timed = measure_trials(proto, p.trials, p.warmup, p.iters, p.permute, self.monitor, p.throttle_retries)
        self.out.stage_seconds["timing_calls"] = sum(proto.host_s[k] for k in CALL_STAGES) - calls_before
        t0 = time.monotonic()
        proto.collect()
        t1 = time.monotonic()
        proto.fetch_timings()
        self.out.stage_seconds["timed_collect"] = t1 - t0
        self.out.stage_seconds["timed_fetch"] = time.monotonic() - t1
        t0 = time.monotonic()
        self.out.audit = self._audit(proto.trials)
        self.out.stage_seconds["meter_audit"] = time.monotonic() - t0
        calls = [r for r in proto.records if r.phase in ("warmup", "timed")]
        verdict = self._rules(child, calls) or timing_verdict(calls, p.tol) or self._work(calls)
        if verdict is None and p.enforce_rules:
            verdict = measurement_verdict(self.out.audit)
        self.out.latency_ms, self.out.trials = finish_trials(timed)
        self.out.timed = [r for _, recs in timed for r in recs]
        return verdict

    def _audit(self, runs: list[MeteredTrial]) -> TimingAudit:
        """Every timed trial's claim against the judge's window and, with a meter, its busy time."""
        meter = self.meter
        interval = getattr(meter, "interval_ns", 0) if meter is not None else 0
        allowance_ms = (allowance_ns(interval) / 1e6 if meter is not None else 0.0) + self.plan.allowance_extra_us / 1e3
        trials: list[TrialAudit] = []
        last = {run.trial: run.attempt for run in runs}
        uncovered_runs = 0
        for run in runs:
            timed = [r for r in run.records if r.phase == "timed" and r.window is not None]
            if not timed:
                continue
            why = run.uncovered()
            if why is not None and run.attempt < last[run.trial]:
                uncovered_runs += 1
                continue  # repeated (measure_trials): only the trial's last run gives timings
            if why is not None:
                raise InfraError(f"the judge's device meter did not cover trial {run.trial} "
                                 f"({run.attempt} runs): {why}")
            calls = [audit_call(r.tag, r.timing.span_ns if r.timing else 0, r.window, run.trace,
                                r.timing.active_ns if r.timing else 0) for r in timed]
            trials.append(trial_audit(run.trial, run.attempt, calls))
        if meter is None:
            return TimingAudit(meter=MeterStatus.DISABLED, claim_fraction=self.plan.claim_fraction,
                               allowance_ms=allowance_ms, trials=trials)
        return TimingAudit(meter=MeterStatus.MEASURED, tool=meter.description, interval_ns=interval,
                           claim_fraction=self.plan.claim_fraction, allowance_ms=allowance_ms,
                           call_overhead_ms=self.plan.call_overhead_ms,
                           overhead_bound_ms=self.plan.overhead_bound_ms, trials=trials,
                           uncovered_runs=uncovered_runs)

    def _rules(self, child: ChildProcess, recs: list[CallRecord]) -> Verdict | None:
        if not self.plan.enforce_rules:
            return None
        if recs and all(r.timing is not None and r.timing.records == 0 for r in recs) and not self.out.env_streams:
            # not even the child's calibration memset was seen: CUPTI is broken, not the candidate (one that
            # launches nothing, with CUPTI working, is judged on its outputs and then by the work rule)
            raise InfraError("CUPTI recorded no GPU activity for any call (profiling unavailable?)")
        if self.plan.mode is SessionMode.TRITON:
            return foreign_kernel_verdict(recs, set(self.out.launches.get("kernels", []))) or stream_verdict(recs)
        mapped = child.mapped_libraries()
        own = child.load_args(self.plan.load).get("library")
        if own and os.path.realpath(own) not in {os.path.realpath(m) for m in mapped}:
            # not even the candidate's own library among what we read: we looked at the wrong process
            raise InfraError(f"cannot read the candidate process's mapped libraries ({len(mapped)} paths seen)")
        return library_verdict(mapped, list(self.plan.needed)) or stream_verdict(recs)

    def _work(self, recs: list[CallRecord]) -> Verdict | None:
        return work_verdict(recs, instrument_ok=bool(self.out.env_streams)) if self.plan.enforce_rules else None

    def _failed(self, exc: CallFailed) -> Verdict:
        """RUNTIME_ERROR, or COMPILE_ERROR with Triton's trimmed message when a Triton child classified it so."""
        if self.plan.mode is SessionMode.TRITON and exc.fault == EvaluationStatus.COMPILE_ERROR.value:
            return Verdict(EvaluationStatus.COMPILE_ERROR, exc.error)
        return Verdict(EvaluationStatus.RUNTIME_ERROR, _call_error(exc))


def _close(child: ChildProcess | None, meter: DeviceMeter | None, slots: list) -> dict[str, float]:
    """End the session: its child, the device meter, the trials' shared buffers; seconds of each part."""
    t0 = time.monotonic()
    if child is not None:
        child.close()
    t1 = time.monotonic()
    if meter is not None:
        meter.close()
    t2 = time.monotonic()
    for slot in slots:
        slot.release()
    return {"child_close": t1 - t0, "meter_close": t2 - t1, "slots_release": time.monotonic() - t2}


def _meter_call(fn: Callable[[int], None], arg: int) -> None:
    try:
        fn(arg)
    except MeterError as exc:
        raise InfraError(f"the judge's device meter: {exc}") from exc


def _launch_report(child: ChildProcess, timeout_s: float) -> dict:
    """The Triton launch report, reduced to well-typed fields (it comes from the candidate's process)."""
    reply = child.request(ChildOp.LAUNCHES, None, "reading the Triton launch report", timeout_s)
    if not reply.ok:
        raise CallFailed(CallRecord(None, "launches", 0, None), reply.error or "no launch report")
    kernels = reply.data.get("kernels")
    steady = reply.data.get("steady")
    per_call = reply.data.get("per_call")
    return {"kernels": [k for k in kernels if isinstance(k, str)] if isinstance(kernels, list) else [],
            "steady": [r for r in steady if isinstance(r, dict)] if isinstance(steady, list) else [],
            "per_call": per_call if isinstance(per_call, list) else []}


def _call_error(exc: CallFailed) -> str:
    rec = exc.record
    fixed = {"load": "loading the module", "bind": "mapping buffers", "launches": "reading the launch report",
             "timings": "reading the CUPTI records"}
    where = fixed.get(rec.phase, f"{rec.phase} call {rec.index} of trial {rec.trial}")
    return f"error while {where}: {exception_line(exc.error)}"
