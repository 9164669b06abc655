"""The call protocol shared by candidates and the baseline: correctness calls, then verified timed calls.

For every call the judge copies the trial's inputs into the slot (permuted along the batch for warm-up
and timed calls), poisons the outputs, flushes L2, synchronises, lets the child make exactly one call,
and queues a fused comparison of every output against the reference (read through the same
permutation) and against the previous call's expectation for that slot (a stale-result detector).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field

from ptxcore.gpu.child.cupti import CallTiming, mean_of_medians_ms, trial_median_ms
from ptxcore.gpu.harness.compare import CompareStats, GpuComparator
from ptxcore.gpu.harness.isolation import ChildProcess
from ptxcore.gpu.harness.monitor import GpuMonitor
from ptxcore.gpu.harness.state import WorkloadState
from ptxcore.gpu.messages import ChildOp, ChildReply

log = logging.getLogger(__name__)

_NO_CALL = object()  # no earlier call on this slot


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


class CallDriver:
    """Drives one child (candidate or baseline) through the calls of one judgement."""

    def __init__(self, child: ChildProcess, state: WorkloadState, slots: list, tol: Tolerance,
                 flusher, call_timeout_s: float, capacity: int,
                 first_call_timeout_s: float | None = None) -> None:  # noqa: ANN001
        """`first_call_timeout_s`: the deadline of the session's first call when it differs (a Triton
        candidate JIT-compiles, and may autotune, inside its first call)."""
        self.child, self.state, self.slots, self.tol = child, state, slots, tol
        self.flusher, self.call_timeout_s = flusher, call_timeout_s
        self.first_call_timeout_s = first_call_timeout_s
        self.comparator = GpuComparator(capacity)
        self.records: list[CallRecord] = []
        self._last_perm: dict[int, object] = {}
        self._keep: list = []
        self._perms: dict[int, object] = {}
        self.host_s = {"harness_prepare": 0.0, "harness_call_roundtrip": 0.0, "harness_compare_queue": 0.0,
                       "child_call_wall": 0.0}
        self.l2_resets = 0

    def bind(self) -> None:
        outputs = [t.name for t in self.state.spec.outputs]
        for i, slot in enumerate(self.slots):
            reply = self.child.request(ChildOp.BIND, {"slot": i, "tensors": slot.descriptor(), "outputs": outputs},
                                       "binding buffers", self.call_timeout_s)
            if not reply.get("ok"):
                raise CallFailed(CallRecord(None, "bind", i, None), reply.get("error", "bind failed"))

    def call(self, phase: str, trial: int, index: int, perm=None) -> CallRecord:  # noqa: ANN001
        import torch

        slot, data = self.slots[trial], self.state.trials[trial]
        rec = CallRecord(len(self.records), phase, trial, index)
        self.records.append(rec)
        t0 = time.perf_counter()
        slot.load_inputs(data.inputs, perm)
        slot.poison_outputs()
        self.flusher.flush()
        torch.cuda.synchronize()
        t1 = time.perf_counter()
        timeout_s = self.call_timeout_s
        if rec.tag == 0 and self.first_call_timeout_s is not None:
            timeout_s = self.first_call_timeout_s
        reply = self.child.request(ChildOp.CALL, {"slot": trial, "tag": rec.tag},
                                   f"call {index} of trial {trial}", timeout_s)
        t2 = time.perf_counter()
        if not reply.get("ok"):
            raise CallFailed(rec, reply.get("error", "call failed"), reply.get("fault"))
        self._queue_compare(rec, slot, data, perm)
        self.host_s["harness_prepare"] += t1 - t0
        self.host_s["harness_call_roundtrip"] += t2 - t1
        self.host_s["harness_compare_queue"] += time.perf_counter() - t2
        self.host_s["child_call_wall"] += reply.get("wall_ns", 0) / 1e9
        self.l2_resets += bool(reply.get("l2_reset"))
        return rec

    def _queue_compare(self, rec: CallRecord, slot, data, perm) -> None:  # noqa: ANN001
        prev = self._last_perm.get(rec.trial, _NO_CALL)
        for t in self.state.spec.outputs:
            out, ref = slot.buffers[t.name].tensor, data.references[t.name]
            rec.rows[t.name] = self._compare(out, ref, t, perm)
            if prev is not _NO_CALL:
                rec.stale_rows[t.name] = self._compare(out, ref, t, prev)
        self._keep.append(perm)
        self._last_perm[rec.trial] = perm

    def _compare(self, out, ref, info, perm) -> int:  # noqa: ANN001
        use_perm = perm is not None and info.batch_dims
        inner = info.numel // info.batch_size if use_perm else 0
        return self.comparator.compare(
            out.data_ptr(), ref.data_ptr(), info.numel, info.dtype, self.tol.atol, self.tol.rtol,
            perm.data_ptr() if use_perm else 0, inner,
        )

    def collect(self) -> None:
        """Read every queued comparison and the child's CUPTI timings into the records."""
        import torch

        torch.cuda.synchronize()
        stats = self.comparator.collect()
        for rec in self.records:
            if not rec.rows:
                continue
            rec.per_output = {n: stats[r] for n, r in rec.rows.items()}
            rec.stats = _merge(list(rec.per_output.values()))
            if rec.stale_rows:
                rec.stale = _merge([stats[r] for r in rec.stale_rows.values()])
        self._keep.clear()

    def fetch_timings(self) -> ChildReply:
        reply = self.child.request(ChildOp.TIMINGS, None, "reading CUPTI records", 120.0)
        by_tag = {c[0]: CallTiming(c[0], c[1], c[2], c[3], tuple(c[4]), tuple(c[5]) if len(c) > 5 else ())
                  for c in reply.get("calls", [])}
        for rec in self.records:
            rec.timing = by_tag.get(rec.tag)
        return reply

    def permutation(self, trial: int, index: int, count: int = 1):  # noqa: ANN201
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

    def timed_trial(self, trial: int, warmup: int, iters: int, permute: bool) -> list[CallRecord]:
        timed = []
        for i in range(warmup + iters):
            perm = self.permutation(trial, i, warmup + iters) if permute else None
            rec = self.call("warmup" if i < warmup else "timed", trial, i, perm)
            if i >= warmup:
                timed.append(rec)
        return timed


def _merge(stats: list[CompareStats]) -> CompareStats:
    out = stats[0]
    for s in stats[1:]:
        out = out.merge(s)
    return out


def measure_trials(proto: CallDriver, trials: int, warmup: int, iters: int, permute: bool,
                   monitor: GpuMonitor, throttle_retries: int) -> list[tuple[TrialTiming, list[CallRecord]]]:
    """Timed trials; a trial taken under thermal/power throttling is repeated (then reported flagged)."""
    out = []
    for t in range(trials):
        for attempt in range(throttle_retries + 1):
            before = monitor.snapshot()
            recs = proto.timed_trial(t, warmup, iters, permute)
            after = monitor.snapshot()
            reasons = sorted(set(before.throttle_reasons) | set(after.throttle_reasons))
            if not reasons or attempt == throttle_retries:
                break
            log.warning("trial %d throttled (%s); repeating", t, ", ".join(reasons))
        out.append((TrialTiming(t, 0.0, reasons, attempt + 1, (before.sm_clock_mhz, after.sm_clock_mhz),
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
