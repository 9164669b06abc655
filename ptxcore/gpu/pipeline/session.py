"""One child session on one workload: correctness calls, the memcheck gate, verified timed trials.

Used for candidates (mode "ffi": a TVM-FFI build; mode "triton": a Triton kernel.py) and for the trusted
baseline (mode "baseline"). Everything the child can do wrong comes back as a Verdict; only our own failures
raise InfraError. Mode triton differs in three places: the first call gets the start-up deadline (Triton
compiles in it), the library rule is the foreign-kernel rule (torch maps cuBLAS/cuDNN into every Triton
child), and a Triton compile error reported by the child is COMPILE_ERROR.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from ptxcore.gpu.errors import InfraError
from ptxcore.gpu.harness.buffers import SharedSlot
from ptxcore.gpu.harness.calls import (
    CallDriver,
    CallFailed,
    CallRecord,
    Tolerance,
    TrialTiming,
    finish_trials,
    measure_trials,
)
from ptxcore.gpu.harness.isolation import ChildDied, ChildForged, ChildProcess, ChildTimeout
from ptxcore.gpu.harness.state import WorkloadState
from ptxcore.gpu.harness.triton import TritonFiles
from ptxcore.gpu.messages import ChildOp
from ptxcore.gpu.pipeline.verdicts import (
    Verdict,
    correctness_verdict,
    foreign_kernel_verdict,
    library_verdict,
    stream_verdict,
    timing_verdict,
    work_verdict,
)
from ptxcore.schema import EvaluationStatus, exception_line

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

    @property
    def kernel_seconds(self) -> float:
        """GPU time of every call the judge made (correctness, warm-up, timed, repeated trials)."""
        return sum(r.timing.span_ns for r in self.all_calls if r.timing) / 1e9


@dataclass(frozen=True)
class SessionPlan:
    mode: str  # "ffi" | "triton" | "baseline"
    load: dict
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
    enforce_rules: bool = True  # stream / library / zero-work rules (candidates, not the baseline)
    candidate: Path | TritonFiles | None = None
    """Modes ffi / triton: the built library or the TritonFiles, handed into the child's sandbox."""


class CandidateSession:
    """Runs a SessionPlan; `gate` (the memcheck stage) runs between correctness and timing."""

    def __init__(self, plan: SessionPlan, state: WorkloadState, flusher, monitor) -> None:  # noqa: ANN001
        self.plan, self.state, self.flusher, self.monitor = plan, state, flusher, monitor
        self.out = SessionOutcome()

    def run(self, gate: Callable[[], Verdict | None] | None = None) -> SessionOutcome:
        slots = [SharedSlot.allocate(self.state.spec) for _ in range(self.plan.trials)]
        child = None
        try:
            started = time.monotonic()
            child = ChildProcess.spawn(self.plan.device, self.plan.mode, self.plan.startup_timeout_s,
                                       self.plan.candidate)
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
            if child is not None:
                child.close()
            for s in slots:
                s.release()
        return self.out

    def _drive(self, child: ChildProcess, slots: list, gate, started: float) -> Verdict | None:  # noqa: ANN001
        reply = child.request(ChildOp.LOAD, child.load_args(self.plan.load), "loading the module",
                              self.plan.startup_timeout_s)
        if not reply.get("ok"):
            raise CallFailed(CallRecord(None, "load", 0, None), reply.get("error", "load failed"), reply.get("fault"))
        capacity = 2 * len(self.state.spec.outputs) * (
            self.plan.trials * (1 + (self.plan.warmup + self.plan.iters) * (self.plan.throttle_retries + 1)))
        first = self.plan.startup_timeout_s if self.plan.mode == "triton" else None
        proto = CallDriver(child, self.state, slots, self.plan.tol, self.flusher, self.plan.call_timeout_s, capacity,
                           first_call_timeout_s=first)
        proto.bind()
        verdict = self._correctness(child, proto)
        self.out.stage_seconds["correctness"] = time.monotonic() - started
        if verdict is not None:
            return verdict
        if gate is not None:
            t0 = time.monotonic()
            verdict = gate()
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
        reply = proto.fetch_timings()
        self.out.correctness, self.out.env_streams = recs, reply.get("env_streams", [])
        self.out.all_calls = list(recs)
        if self.plan.mode == "triton":
            self.out.launches = _launch_report(child, self.plan.call_timeout_s)
        return self._rules(child, recs) or correctness_verdict(recs, self.plan.tol) or self._work(recs)

    def _timing(self, child: ChildProcess, proto: CallDriver) -> Verdict | None:
        p = self.plan
        timed = measure_trials(proto, p.trials, p.warmup, p.iters, p.permute, self.monitor, p.throttle_retries)
        proto.collect()
        proto.fetch_timings()
        calls = [r for r in proto.records if r.phase in ("warmup", "timed")]
        verdict = self._rules(child, calls) or timing_verdict(calls, p.tol) or self._work(calls)
        self.out.latency_ms, self.out.trials = finish_trials(timed)
        self.out.timed = [r for _, recs in timed for r in recs]
        return verdict

    def _rules(self, child: ChildProcess, recs: list[CallRecord]) -> Verdict | None:
        if not self.plan.enforce_rules:
            return None
        if recs and all(r.timing is not None and r.timing.records == 0 for r in recs) and not self.out.env_streams:
            # not even the child's calibration memset was seen: CUPTI is broken, not the candidate (one that
            # launches nothing, with CUPTI working, is judged on its outputs and then by the work rule)
            raise InfraError("CUPTI recorded no GPU activity for any call (profiling unavailable?)")
        if self.plan.mode == "triton":
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
        if self.plan.mode == "triton" and exc.fault == EvaluationStatus.COMPILE_ERROR.value:
            return Verdict(EvaluationStatus.COMPILE_ERROR, exc.error)
        return Verdict(EvaluationStatus.RUNTIME_ERROR, _call_error(exc))


def _launch_report(child: ChildProcess, timeout_s: float) -> dict:
    """The Triton launch report, reduced to well-typed fields (it comes from the candidate's process)."""
    reply = child.request(ChildOp.LAUNCHES, None, "reading the Triton launch report", timeout_s)
    if not reply.get("ok"):
        raise CallFailed(CallRecord(None, "launches", 0, None), reply.get("error", "no launch report"))
    kernels = reply.get("kernels")
    steady = reply.get("steady")
    per_call = reply.get("per_call")
    return {"kernels": [k for k in kernels if isinstance(k, str)] if isinstance(kernels, list) else [],
            "steady": [r for r in steady if isinstance(r, dict)] if isinstance(steady, list) else [],
            "per_call": per_call if isinstance(per_call, list) else []}


def _call_error(exc: CallFailed) -> str:
    rec = exc.record
    fixed = {"load": "loading the module", "bind": "mapping buffers", "launches": "reading the launch report"}
    where = fixed.get(rec.phase, f"{rec.phase} call {rec.index} of trial {rec.trial}")
    return f"error while {where}: {exception_line(exc.error)}"
