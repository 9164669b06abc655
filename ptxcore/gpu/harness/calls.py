"""The call protocol shared by candidates and the baseline: correctness calls, then verified timed calls.

For every call the judge copies the trial's inputs into the slot (permuted along the batch for warm-up
and timed calls), poisons the outputs, flushes L2, synchronises, lets the child make exactly one call,
and queues a fused comparison of every output against the reference (read through the same
permutation) and against the previous call's expectation for that slot (a stale-result detector).

The judge also keeps its own stamps of every call (harness.audit.CallWindow, in its clock: the device
meter's when one runs): when the request was written, when the reply was read, and how long its own GPU work
after the call took (CUDA events on its stream), so the child's claimed spans can be audited against what the
judge measured itself.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from ptxcore.gpu.child.cupti import CallTiming, mean_of_medians_ms, trial_median_ms
from ptxcore.gpu.harness.audit import CallWindow
from ptxcore.gpu.harness.compare import CompareStats, GpuComparator
from ptxcore.gpu.harness.isolation import ChildProcess
from ptxcore.gpu.harness.monitor import GpuMonitor
from ptxcore.gpu.harness.state import WorkloadState, digest
from ptxcore.gpu.messages import CallReply, ChildOp, TimingsReply

if TYPE_CHECKING:
    import torch

    from ptxcore.gpu.harness.buffers import SharedSlot
    from ptxcore.gpu.harness.l2 import L2Flusher
    from ptxcore.gpu.harness.meter import DeviceMeter, MeterTrace
    from ptxcore.gpu.harness.state import TrialData
    from ptxcore.gpu.harness.workloads import TensorInfo

log = logging.getLogger(__name__)

_NO_CALL = object()  # no earlier call on this slot

CALL_STAGES = ("harness_prepare", "harness_call_roundtrip", "harness_compare_queue")
"""The host's loop around each call: staging its inputs, its request and reply, queueing its comparison."""
HOST_STAGES = (*CALL_STAGES, "child_call_wall", "meter_start", "meter_stop", "meter_decode", "meter_evaluate",
               "gpu_monitor")
"""The judge's own host-side times of a session, summed over its calls and trials (issue 27: where the timing
stage's wall goes beside the kernels): staging a call's inputs, its request/reply, queueing its comparison, the
child's own wall per call, the device meter's start (settle) and stop (settle, stop, decode) per trial, of that
stop its decode and its metric evaluation, and the GPU monitor's snapshots around each trial."""


@dataclass(frozen=True)
class Tolerance:
    atol: float
    rtol: float
    matched_ratio: float


@dataclass
class CallRecord:
    """One call the judge made and how its outputs compared."""

    tag: int | None
    """The call's number in this session (None: a load or bind step, not a call)."""
    phase: str  # "correctness" | "warmup" | "timed" | "load" | "bind"
    trial: int
    index: int | None
    rows: dict[str, int] = field(default_factory=dict)
    stale_rows: dict[str, int] = field(default_factory=dict)
    stats: CompareStats | None = None
    stale: CompareStats | None = None
    per_output: dict[str, CompareStats] = field(default_factory=dict)
    timing: CallTiming | None = None
    """What the child's CUPTI records claim the call ran."""
    window: CallWindow | None = None
    """The judge's own stamps around the call."""
    digests: dict[str, torch.Tensor] = field(default_factory=dict)
    """Correctness calls: per output, its `state.digest` queued right after the comparison (the float64
    arbitration reads the outputs again later and must find what was compared)."""


class CallFailed(RuntimeError):
    """The child reported an error for a call (Python exception or CUDA error): a runtime error.
    `fault`: the child's classification of a Triton candidate's fault (COMPILE_ERROR / RUNTIME_ERROR), if any."""

    def __init__(self, record: CallRecord, error: str, fault: str | None = None) -> None:
        super().__init__(error)
        self.record, self.error, self.fault = record, error, fault


@dataclass
class TrialTiming:
    trial: int
    median_ms: float
    throttle_reasons: list[str]
    attempts: int
    clocks_mhz: tuple[int, int]
    temps_c: tuple[int, int]


@dataclass
class MeteredTrial:
    """One run of a timed trial: its calls and, when the device meter ran, its trace."""

    trial: int
    attempt: int
    records: list[CallRecord]
    trace: MeterTrace | None

    def uncovered(self) -> str | None:
        """Why the meter's trace does not measure this run's timed calls, None when it does (or no meter ran)."""
        timed = [r for r in self.records if r.phase == "timed" and r.window is not None]
        if self.trace is None or not timed:
            return None
        return self.trace.uncovered(timed[0].window.sent_ns, timed[-1].window.gap_end_ns or timed[-1].window.replied_ns)


class CallDriver:
    """Drives one child (candidate or baseline) through the calls of one judgement."""

    def __init__(self, child: ChildProcess, state: WorkloadState, slots: list[SharedSlot], tol: Tolerance,
                 flusher: L2Flusher, call_timeout_s: float, capacity: int,
                 first_call_timeout_s: float | None = None, meter: DeviceMeter | None = None) -> None:
        """`first_call_timeout_s`: the deadline of the session's first call when it differs (a Triton
        candidate JIT-compiles, and may autotune, inside its first call). `meter`: the judge's device meter
        (its clock stamps every call; it runs during timed trials, see `timed_trial`)."""
        self.child, self.state, self.slots, self.tol = child, state, slots, tol
        self.flusher, self.call_timeout_s = flusher, call_timeout_s
        self.first_call_timeout_s = first_call_timeout_s
        self.meter = meter
        self.clock: Callable[[], int] = meter.now_ns if meter is not None else time.perf_counter_ns
        self.new_event: Callable[[], torch.cuda.Event] = _recorded_event
        self.comparator = GpuComparator(capacity)
        self.records: list[CallRecord] = []
        self.trials: list[MeteredTrial] = []
        self._last_perm: dict[int, object] = {}
        self._keep: list = []
        self._perms: dict[int, object] = {}
        self.references: dict[int, dict[str, torch.Tensor]] = {}
        """Per trial, references that replace the workload state's for this session's later calls (a float64
        arbitration that found the library inexact: pipeline.arbitration)."""
        self._open_gap: tuple[CallRecord, torch.cuda.Event] | None = None  # (last call, event after its reply)
        self.host_s = dict.fromkeys(HOST_STAGES, 0.0)
        self.l2_resets = 0

    def add_host_s(self, stage: str, seconds: float) -> None:
        """Add to one of the judge's own host-side times (HOST_STAGES), reported in the verdict's stage_seconds."""
        self.host_s[stage] = self.host_s.get(stage, 0.0) + seconds

    def bind(self) -> None:
        outputs = [t.name for t in self.state.spec.outputs]
        for i, slot in enumerate(self.slots):
            reply = self.child.request(ChildOp.BIND, {"slot": i, "tensors": slot.descriptor(), "outputs": outputs},
                                       "binding buffers", self.call_timeout_s)
            if not reply.ok:
                raise CallFailed(CallRecord(None, "bind", i, None), reply.error or "bind failed")

    def call(self, phase: str, trial: int, index: int, perm: torch.Tensor | None = None) -> CallRecord:
        slot, data = self.slots[trial], self.state.trials[trial]
        rec = CallRecord(len(self.records), phase, trial, index)
        self.records.append(rec)
        t0 = time.perf_counter()
        slot.load_inputs(data.inputs, perm)
        slot.poison_outputs()
        self.flusher.flush()
        self._sync_and_close_gap()
        t1 = time.perf_counter()
        timeout_s = self.call_timeout_s
        if rec.tag == 0 and self.first_call_timeout_s is not None:
            timeout_s = self.first_call_timeout_s
        sent = self.clock()
        reply = self.child.request(ChildOp.CALL, {"slot": trial, "tag": rec.tag},
                                   f"call {index} of trial {trial}", timeout_s)
        replied = self.clock()
        t2 = time.perf_counter()
        if not reply.ok:
            raise CallFailed(rec, reply.error or "call failed", reply.fault)
        rec.window = CallWindow(sent, replied)
        self._open_gap = (rec, self.new_event())
        self._queue_compare(rec, slot, data, perm)
        answer = CallReply.from_data(reply.data)
        self.host_s["harness_prepare"] += t1 - t0
        self.host_s["harness_call_roundtrip"] += t2 - t1
        self.host_s["harness_compare_queue"] += time.perf_counter() - t2
        self.host_s["child_call_wall"] += answer.wall_ns / 1e9
        self.l2_resets += answer.l2_reset
        return rec

    def _sync_and_close_gap(self) -> None:
        """Synchronise the judge's stream; the last call's gap (its reply until now) gets its end and the span
        of the judge's own GPU work in it."""
        import torch

        end_event = self.new_event() if self._open_gap is not None else None
        torch.cuda.synchronize()
        if self._open_gap is None:
            return
        rec, after_reply = self._open_gap
        self._open_gap = None
        span_ns = after_reply.elapsed_time(end_event) * 1e6
        rec.window = replace(rec.window, gap_end_ns=self.clock(), judge_gap_span_ns=span_ns)

    def _queue_compare(self, rec: CallRecord, slot: SharedSlot, data: TrialData, perm: torch.Tensor | None) -> None:
        prev = self._last_perm.get(rec.trial, _NO_CALL)
        for t in self.state.spec.outputs:
            out, ref = slot.buffers[t.name].tensor, self.references.get(rec.trial, data.references)[t.name]
            rec.rows[t.name] = self._compare(out, ref, t, perm)
            if rec.phase == "correctness":
                rec.digests[t.name] = digest(out)
            if prev is not _NO_CALL:
                rec.stale_rows[t.name] = self._compare(out, ref, t, prev)
        self._keep.append(perm)
        self._last_perm[rec.trial] = perm

    def _compare(self, out: torch.Tensor, ref: torch.Tensor, info: TensorInfo, perm: torch.Tensor | None) -> int:
        use_perm = perm is not None and info.batch_dims
        inner = info.numel // info.batch_size if use_perm else 0
        return self.comparator.compare(
            out.data_ptr(), ref.data_ptr(), info.numel, info.dtype, self.tol.atol, self.tol.rtol,
            perm.data_ptr() if use_perm else 0, inner,
        )

    def collect(self) -> None:
        """Read every queued comparison into the records."""
        self._sync_and_close_gap()
        stats = self.comparator.collect()
        for rec in self.records:
            if not rec.rows:
                continue
            rec.per_output = {n: stats[r] for n, r in rec.rows.items()}
            rec.stats = _merge(list(rec.per_output.values()))
            if rec.stale_rows:
                rec.stale = _merge([stats[r] for r in rec.stale_rows.values()])
        self._keep.clear()

    def fetch_timings(self) -> TimingsReply:
        """The child's CUPTI claims, attached to the records by tag (a malformed reply is a ProtocolViolation,
        raised as ChildForged by the request)."""
        reply = self.child.request(ChildOp.TIMINGS, None, "reading CUPTI records", 120.0)
        if not reply.ok:
            raise CallFailed(CallRecord(None, "timings", 0, None), reply.error or "no timings")
        timings = self.child.parse(reply.data, TimingsReply.from_data, "reading CUPTI records")
        by_tag = {c.tag: CallTiming(c.tag, c.span_ns, c.records, c.kernels, c.off_stream, c.kernel_names,
                                    c.active_ns)
                  for c in timings.calls}
        for rec in self.records:
            rec.timing = by_tag.get(rec.tag)
        return timings

    def permutation(self, trial: int, index: int, count: int = 1) -> torch.Tensor | None:
        """The seeded batch permutation of call `index` of `trial` (a trial's `count` permutations are drawn
        together: argsort of uniform keys, one row per call)."""
        import torch

        n = self.state.spec.batch_size
        if n <= 1:
            return None
        if trial not in self._perms or self._perms[trial].shape[0] < count:
            gen = torch.Generator(device="cuda")
            gen.manual_seed(self.state.trials[trial].seed * 1_000_003 + 1)
            keys = torch.rand((max(count, index + 1), n), generator=gen, device="cuda")
            self._perms[trial] = torch.argsort(keys, dim=1)
        return self._perms[trial][index]

    def timed_trial(self, trial: int, warmup: int, iters: int, permute: bool, attempt: int = 1) -> list[CallRecord]:
        """Warm-up then timed calls; the device meter (when there is one) runs from the first call's staging
        to the end of the judge's work after the last, and its trace is kept with the trial."""
        meter = self.meter
        if meter is not None:
            self._sync_and_close_gap()
            t0 = time.perf_counter()
            meter.start()
            self.add_host_s("meter_start", time.perf_counter() - t0)
        calls, timed = [], []
        try:
            for i in range(warmup + iters):
                perm = self.permutation(trial, i, warmup + iters) if permute else None
                rec = self.call("warmup" if i < warmup else "timed", trial, i, perm)
                calls.append(rec)
                if i >= warmup:
                    timed.append(rec)
            self._sync_and_close_gap()
        except BaseException:
            if meter is not None:
                _stop_quietly(meter)
            raise
        trace = None
        if meter is not None:
            t0 = time.perf_counter()
            trace = meter.stop()
            self.add_host_s("meter_stop", time.perf_counter() - t0)
            if trace.decoded is not None:
                self.add_host_s("meter_decode", trace.decoded.decode_s)
                self.add_host_s("meter_evaluate", trace.decoded.evaluate_s)
        self.trials.append(MeteredTrial(trial, attempt, calls, trace))
        return timed


def _stop_quietly(meter: DeviceMeter) -> None:
    """Stop the meter while another failure is on its way out (that failure is the outcome)."""
    try:
        meter.stop()
    except Exception as exc:  # noqa: BLE001 - the failure in flight decides the verdict
        log.warning("device meter stop after a failed trial: %s", exc)


def _recorded_event() -> torch.cuda.Event:
    """A timing event recorded now on the judge's current stream."""
    import torch

    ev = torch.cuda.Event(enable_timing=True)
    ev.record()
    return ev


def _merge(stats: list[CompareStats]) -> CompareStats:
    out = stats[0]
    for s in stats[1:]:
        out = out.merge(s)
    return out


METER_REPEATS = 2
"""A trial whose timed calls the device meter's trace does not cover is run again up to this many times. Seen on
the H200 (2026-12-02, fourth session): 2 of 16 library kernels of 6.4 and 20 ms a call were INFRA_ERROR for a
trial 0 the samples did not cover (a hole of 0.57 s; or one sample only); judged again, the 6.4 ms one was covered,
the 20 ms one had a 0.63 s hole again. In the fifth session no trace had a hole (53 library judgements, both kernels
among them), so this repeat has not yet run on a GPU. The cause is not established. Only the last run of a trial
gives its timings, and it must be covered (the audit fails closed otherwise)."""


def measure_trials(proto: CallDriver, trials: int, warmup: int, iters: int, permute: bool,
                   monitor: GpuMonitor, throttle_retries: int) -> list[tuple[TrialTiming, list[CallRecord]]]:
    """Timed trials; a trial taken under thermal/power throttling is repeated (then reported flagged), and one the
    device meter did not cover is repeated up to METER_REPEATS times."""
    out = []
    for t in range(trials):
        attempt = throttled = unmetered = 0
        while True:
            attempt += 1
            t0 = time.perf_counter()
            before = monitor.snapshot()
            t1 = time.perf_counter()
            recs = proto.timed_trial(t, warmup, iters, permute, attempt)
            t2 = time.perf_counter()
            after = monitor.snapshot()
            proto.add_host_s("gpu_monitor", (t1 - t0) + (time.perf_counter() - t2))
            gap = proto.trials[-1].uncovered() if proto.trials and proto.trials[-1].attempt == attempt else None
            if gap is not None and unmetered < METER_REPEATS:
                unmetered += 1
                log.warning("trial %d: the device meter did not cover it (%s); repeating", t, gap)
                continue
            reasons = sorted(set(before.throttle_reasons) | set(after.throttle_reasons))
            if reasons and throttled < throttle_retries:
                throttled += 1
                log.warning("trial %d throttled (%s); repeating", t, ", ".join(reasons))
                continue
            break
        out.append((TrialTiming(t, 0.0, reasons, attempt, (before.sm_clock_mhz, after.sm_clock_mhz),
                                (before.temperature_c, after.temperature_c)), recs))
    return out


def finish_trials(timed: list[tuple[TrialTiming, list[CallRecord]]]) -> tuple[float, list[TrialTiming]]:
    """Mean of per-trial medians (ms), after CUPTI timings were fetched."""
    trials = []
    for tt, recs in timed:
        spans = [r.timing.span_ns for r in recs if r.timing is not None]
        median = trial_median_ms(spans) if spans else 0.0
        trials.append(TrialTiming(tt.trial, median, tt.throttle_reasons, tt.attempts, tt.clocks_mhz, tt.temps_c))
    return mean_of_medians_ms([t.median_ms for t in trials]), trials
