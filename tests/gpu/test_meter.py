"""The judge's device meter and the timing audit, without a GPU: trace arithmetic, the audit of one call and one
trial, the measurement rule against forged claims, and the session's fail-closed handling of a meter that cannot
measure. The H200 run of the same rule against real forgeries is tests/gpu/test_hostile_gpu.py (h12, h13)."""

from __future__ import annotations

import time
from types import SimpleNamespace

import pytest

from ptxcore.gpu.child.cupti import CallTiming
from ptxcore.gpu.errors import InfraError
from ptxcore.gpu.harness.audit import (
    AuditedCall,
    CallWindow,
    allowance_ns,
    audit_call,
    forged_trial,
    reference_call_overhead_ms,
    trial_audit,
)
from ptxcore.gpu.harness.calls import HOST_STAGES, CallRecord, MeteredTrial, Tolerance
from ptxcore.gpu.harness.meter import MeterError, MeterSample, MeterTrace, PmSamplingMeter, choose_interval_ns
from ptxcore.gpu.messages import SessionMode
from ptxcore.gpu.pipeline.verdicts import measurement_verdict
from ptxcore.schema import EvaluationStatus, MeterStatus, TimingAudit, TrialAudit

US = 1_000


def _trace(busy_spans: list[tuple[int, int]], lo: int, hi: int, interval: int = 10 * US) -> MeterTrace:
    """Samples every `interval` over [lo, hi) with the GPU busy during `busy_spans` (ns)."""
    samples = []
    for s in range(lo, hi, interval):
        e = s + interval
        busy = sum(max(0, min(e, b1) - max(s, b0)) for b0, b1 in busy_spans)
        samples.append(MeterSample(s, e, float(busy), float(busy) * 0.8))
    return MeterTrace(tuple(samples), interval)


def test_busy_time_of_a_range_spreads_samples_over_their_interval():
    t = _trace([(100 * US, 600 * US)], 0, 1000 * US)
    assert t.busy_ns(0, 1000 * US) == pytest.approx(500 * US)
    assert t.busy_ns(100 * US, 600 * US) == pytest.approx(500 * US)
    assert t.busy_ns(105 * US, 115 * US) == pytest.approx(10 * US)  # one busy sample, fully inside
    assert t.busy_ns(700 * US, 900 * US) == 0.0
    assert t.tensor_ns(100 * US, 600 * US) == pytest.approx(400 * US)


def test_coverage_is_checked_not_assumed():
    t = _trace([], 1000, 10_000, interval=1000)
    assert t.uncovered(1000, 10_000) is None
    assert t.uncovered(0, 11_500) is None  # within two intervals of either end: the allowance's own error
    assert "not the calls'" in t.uncovered(0, 14_000)
    assert "not the calls'" in t.uncovered(-2_000, 10_000)
    holed = MeterTrace(t.samples[:3] + t.samples[7:], 1000)
    why = holed.uncovered(1000, 10_000)
    assert "a hole of 4000 ns" in why and "3000 ns after the calls' start of 9000 ns; 5 samples" in why
    assert "no samples" in MeterTrace((), 1000).uncovered(0, 1)
    with pytest.raises(ValueError):
        MeterTrace(tuple(reversed(t.samples)), 1000)


def test_the_interval_gives_about_a_hundred_samples_per_call_within_bounds():
    assert choose_interval_ns(1_400_000, 60) == 14_000           # a 1.4 ms call window
    assert choose_interval_ns(50_000, 60) == 2_000               # never under 2 us
    assert choose_interval_ns(10e9, 60) == 500_000               # never over 500 us
    assert choose_interval_ns(100e6, 60) >= 60 * 100e6 / 50_000  # at most 50,000 samples per trial
    assert choose_interval_ns(1_400_000, 60, per_call=25) == 56_000  # a coarser meter: a quarter of the samples


def test_the_judges_plan_carries_the_meters_samples_per_call():
    from ptxcore.gpu.config import JudgeConfig
    from ptxcore.gpu.messages import SessionMode
    from ptxcore.gpu.pipeline.judge import GpuJudge
    from ptxcore.problems import get_problem

    assert JudgeConfig().meter_samples_per_call == 25
    judge = object.__new__(GpuJudge)
    judge.config = JudgeConfig(meter_samples_per_call=50)
    plan = judge.plan(get_problem("gemm_n7168_k5120"), SessionMode.FFI, {})
    assert plan.meter_samples_per_call == 50
    with pytest.raises(ValueError):
        JudgeConfig(meter_samples_per_call=2)  # too few to bound a call's busy time


def _call(trace: MeterTrace, claimed_us: float, sent: int, replied: int, gap_end: int | None = None,
          judge_span: float | None = None) -> AuditedCall:
    return audit_call(0, int(claimed_us * US), CallWindow(sent, replied, gap_end, judge_span), trace)


def test_an_honest_call_claims_what_the_meter_saw():
    t = _trace([(200 * US, 950 * US), (1100 * US, 1300 * US)], 0, 1500 * US)  # the kernel, then the judge's work
    c = _call(t, 750, 100 * US, 1000 * US, gap_end=1400 * US, judge_span=250 * US)
    assert c.busy_ns == pytest.approx(750 * US) and c.after_ns == 0.0
    audit = trial_audit(0, 1, [c])
    assert forged_trial(audit, 0.5, allowance_ns(t.interval_ns) / 1e6) is None


def test_a_claim_a_tenth_of_the_work_is_forged_and_both_figures_are_named():
    t = _trace([(200 * US, 950 * US)], 0, 1200 * US)
    audit = trial_audit(2, 1, [_call(t, 75, 100 * US, 1000 * US)])
    why = forged_trial(audit, 0.5, allowance_ns(t.interval_ns) / 1e6)
    assert why is not None and "0.0750 ms" in why and "0.7500 ms" in why and "trial 2" in why


def test_work_left_running_after_the_reply_counts_against_the_claim():
    """A harness patched to answer before the GPU is done: the kernel runs on after the reply, before the
    judge's own work in that gap; its busy time beyond the judge's span is the candidate's."""
    t = _trace([(200 * US, 1700 * US), (1800 * US, 2000 * US)], 0, 2200 * US)
    c = _call(t, 80, 100 * US, 300 * US, gap_end=2100 * US, judge_span=250 * US)
    assert 1400 * US < c.busy_ns <= 1500 * US and c.after_ns > 1300 * US  # the judge span is subtracted whole
    assert forged_trial(trial_audit(0, 1, [c]), 0.5, allowance_ns(t.interval_ns) / 1e6) is not None


def _h200_trial(claimed_ms: float, busy_ms: float) -> TrialAudit:
    return TrialAudit(trial=0, attempt=1, timed_calls=50, claimed_median_ms=claimed_ms,
                      window_median_ms=busy_ms + 0.2, busy_median_ms=busy_ms)


def test_the_harness_own_busy_time_per_call_does_not_accuse_a_short_honest_kernel():
    """H200, 2026-12-02: an honest 0.087 ms paged-decode kernel metered 0.337 ms busy a call (every call carries
    0.16-0.30 ms of busy time beyond its kernels, the GEMMs' too): the 0.5 rule called it forged. Now the
    baseline's measured harness time is taken off for a pass, the most ever seen for an accusation, and between
    the two floors the judgement is inconclusive (INFRA_ERROR, never a pass)."""
    allowance = 0.0396
    decode = _h200_trial(0.087392, 0.3365371)
    assert forged_trial(decode, 0.5, allowance) is not None  # the false accusation, before
    baseline = [_h200_trial(0.3953, 0.6441), _h200_trial(0.3950, 0.6462)]  # a baseline that shows the overhead
    overhead = reference_call_overhead_ms(baseline)
    assert overhead == pytest.approx(0.2488)  # the least over its trials
    assert forged_trial(decode, 0.5, allowance, overhead) is None
    forged = _h200_trial(0.001, 0.3365371)  # next to nothing claimed for the same work
    why = forged_trial(forged, 0.5, allowance, overhead)
    assert why is not None and "less 0.2488 ms of the harness's own per-call busy time" in why
    # the rule's limit at this size: the allowance (two 10 us intervals + 20 us) is half the kernel, so a claim
    # of a tenth passes (SECURITY.md, "Timing authority")
    assert forged_trial(_h200_trial(0.0087, 0.3365371), 0.5, allowance, overhead) is None
    gemm = _h200_trial(0.0768, 1.0096)  # h12-style: the GEMM's busy, a tenth claimed
    assert forged_trial(gemm, 0.5, 0.055, 0.30) is not None
    assert reference_call_overhead_ms([]) == 0.0  # a baseline not metered: nothing taken off
    assert reference_call_overhead_ms([{"claimed_median_ms": 1.0, "busy_median_ms": None}]) == 0.0
    assert reference_call_overhead_ms([{"claimed_median_ms": 1.0, "busy_median_ms": 0.9}]) == 0.0  # never negative
    # FlashInfer-like: launches with idle gaps claim a 0.395 ms span for 0.15 ms of GPU work; busy minus the
    # claim says 0, busy minus the covered time gives the harness's figure
    gappy = {"claimed_median_ms": 0.395, "busy_median_ms": 0.40, "covered_median_ms": 0.15}
    assert reference_call_overhead_ms([gappy]) == pytest.approx(0.25)
    assert reference_call_overhead_ms([{**gappy, "covered_median_ms": None}]) == pytest.approx(0.005)

    def audit(trial: TrialAudit, measured: float, bound: float = 0.30) -> TimingAudit:
        return TimingAudit(meter=MeterStatus.MEASURED, tool="cupti pm", interval_ns=9785, claim_fraction=0.5,
                           allowance_ms=allowance, call_overhead_ms=measured, overhead_bound_ms=bound,
                           trials=[trial])

    assert measurement_verdict(audit(decode, overhead)) is None  # the baseline showed the harness time: PASSED
    # FlashInfer's baseline shows none (its claimed span has gaps: busy - claim <= 0 on the H200), so the honest
    # decode kernel is inconclusive: no pass, no accusation
    v = measurement_verdict(audit(decode, 0.0))
    assert v.status is EvaluationStatus.INFRA_ERROR and v.reason.startswith("timing audit inconclusive: ")
    assert "cannot tell this kernel's claim from the harness's time" in v.reason
    # a forger of this size cannot be told from the harness either: inconclusive as well, so it never passes
    assert measurement_verdict(audit(forged, 0.0)).status is EvaluationStatus.INFRA_ERROR
    bigger = _h200_trial(0.01, 0.75)  # a 0.5 ms kernel claimed as 0.01: below the floor even with 0.30 ms off
    v = measurement_verdict(audit(bigger, 0.0))
    assert v.status is EvaluationStatus.REWARD_HACK and v.reason.startswith("forged its timing: ")
    assert measurement_verdict(audit(decode, 0.0, bound=0.0)).status is EvaluationStatus.REWARD_HACK  # old records
    assert measurement_verdict(audit(gemm, 0.294)).status is EvaluationStatus.REWARD_HACK
    honest_gemm = _h200_trial(0.827503, 1.0715818)  # the GEMM of the same H200 call, cuBLAS's 0.294 ms off
    assert measurement_verdict(audit(honest_gemm, 0.2943)) is None
    # a baseline figure above the bound (a baseline with busy work outside its spans) is capped at the bound: a
    # forger gets no wider rule from it
    assert measurement_verdict(audit(bigger, 5.0)).status is EvaluationStatus.REWARD_HACK
    # the candidate's own covered time (its process reports it) never enters its rule: claiming full coverage
    # changes nothing for a forger
    claimed_full = bigger.model_copy(update={"covered_median_ms": 0.75})
    assert measurement_verdict(audit(claimed_full, 0.0)).status is EvaluationStatus.REWARD_HACK


def test_trial_medians_and_the_tensor_share():
    t = _trace([(0, 2000 * US)], 0, 2000 * US)
    calls = [_call(t, 100 * (i + 1), i * 300 * US, i * 300 * US + 200 * US) for i in range(5)]
    audit = trial_audit(1, 2, calls)
    assert audit.claimed_median_ms == pytest.approx(0.3) and audit.busy_median_ms == pytest.approx(0.2)
    assert audit.window_median_ms == pytest.approx(0.2) and audit.tensor_active_share == pytest.approx(0.8)
    covered = trial_audit(0, 1, [audit_call(i, 300_000, CallWindow(0, 400_000), t, (i + 1) * 100_000)
                                 for i in range(3)])
    assert covered.covered_median_ms == pytest.approx(0.2)  # the median of 0.1, 0.2, 0.3 ms
    bare = trial_audit(0, 1, [audit_call(0, 5000, CallWindow(0, 9000), None)])
    assert bare.busy_median_ms is None and bare.tensor_active_share is None
    assert forged_trial(bare, 0.5, 0.0) is None  # nothing measured, nothing to contradict


def _audit(claimed: float, busy: float | None, meter: MeterStatus = MeterStatus.MEASURED) -> TimingAudit:
    trial = TrialAudit(trial=0, attempt=1, timed_calls=3, claimed_median_ms=claimed, window_median_ms=busy or 1.0,
                       busy_median_ms=busy)
    extra = {"tool": "test meter", "interval_ns": 10_000} if meter is MeterStatus.MEASURED else {}
    return TimingAudit(meter=meter, claim_fraction=0.5, allowance_ms=0.04, trials=[trial], **extra)


def test_the_measurement_verdict():
    assert measurement_verdict(_audit(0.74, 0.75)) is None
    v = measurement_verdict(_audit(0.07, 0.75))
    assert v.status is EvaluationStatus.REWARD_HACK and v.reason.startswith("forged its timing")
    assert measurement_verdict(_audit(0.07, None, MeterStatus.DISABLED)) is None
    assert measurement_verdict(None) is None


def test_an_audit_says_whether_it_was_measured():
    with pytest.raises(ValueError):
        TimingAudit(meter=MeterStatus.MEASURED, claim_fraction=0.5, allowance_ms=0.0)  # no tool or interval
    with pytest.raises(ValueError):
        _audit(0.1, 0.2, MeterStatus.DISABLED)  # busy time without a meter


class FakeCounterData(list):
    """cupti-python's CounterData as `drain` reads it: completed samples, and the image's slot counts."""

    def __init__(self, starts: list[int], slots: int) -> None:
        super().__init__(SimpleNamespace(start_timestamp=t, end_timestamp=t + 10, metric_values=[5.0, 10.0])
                         for t in starts)
        self.num_total_samples, self.num_populated_samples, self.num_completed_samples = slots, len(starts), len(starts)


class FakeCollector:
    """Holds `records` sample start times in its 'hardware buffer'; each decode takes up to max_samples."""

    def __init__(self, records: int) -> None:
        self.buffer, self.decodes = list(range(0, records * 10, 10)), 0

    def decode(self, max_samples: int) -> FakeCounterData:
        self.decodes += 1
        taken, self.buffer = self.buffer[:max_samples], self.buffer[max_samples:]
        return FakeCounterData(taken, max_samples)


def test_a_full_counter_image_is_decoded_again_until_the_buffer_is_drained():
    """A decode that filled its image may have left records behind (they would start the next trial's trace);
    they are read now, and the counts say how many decodes it took."""
    from ptxcore.gpu.harness.meter import MAX_DECODES, drain

    col = FakeCollector(records=2_500)
    samples, decoded = drain(col, 1_000, ("gr_active", "gr_elapsed"))
    assert col.decodes == 3 and len(samples) == 2_500 and not col.buffer
    assert (decoded.total, decoded.populated, decoded.completed) == (3_000, 2_500, 2_500)
    assert samples[0].busy_ns == pytest.approx(5.0)  # half of each 10 ns interval
    exact = FakeCollector(records=1_000)  # exactly one image's worth: one more, empty, decode ends it
    assert len(drain(exact, 1_000, ("a", "b"))[0]) == 1_000 and exact.decodes == 2
    endless = FakeCollector(records=10**6)
    with pytest.raises(MeterError, match=f"not drained in {MAX_DECODES} decodes"):
        drain(endless, 1_000, ("a", "b"))


def test_without_pm_sampling_the_meter_is_unavailable_not_faked(monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "cupti", None)
    with pytest.raises(MeterError, match="PM sampling"):
        PmSamplingMeter(0)


# ---- the session: fail closed -------------------------------------------------------------------------------

class FakeMeter:
    description = "fake meter"

    def __init__(self, fail: str | None = None, trace: MeterTrace | None = None) -> None:
        self.fail, self.trace, self.interval_ns, self.events = fail, trace, 10 * US, []

    def now_ns(self) -> int:
        return 0

    def open(self) -> None:
        self.events.append("open")
        if self.fail == "open":
            raise MeterError("sampler busy")

    def configure(self, interval_ns: int) -> None:
        self.interval_ns = interval_ns

    def start(self) -> None:
        self.events.append("start")

    def stop(self) -> MeterTrace:
        self.events.append("stop")
        return self.trace

    def close(self) -> None:
        self.events.append("close")


def _session(mode: SessionMode, meter: FakeMeter | None):
    from ptxcore.gpu.pipeline.session import CandidateSession, SessionPlan

    plan = SessionPlan(mode=mode, load={}, trials=1, warmup=0, iters=1, permute=False, tol=Tolerance(1e-2, 1e-2, 1.0),
                       call_timeout_s=30.0, startup_timeout_s=60.0, throttle_retries=0, device=0)
    return CandidateSession(plan, SimpleNamespace(), None, None, meter)


def test_a_candidate_that_cannot_be_metered_is_infra_and_the_baseline_goes_on():
    with pytest.raises(InfraError, match="device meter is not available"):
        _session(SessionMode.FFI, FakeMeter(fail="open"))._open_meter()
    baseline = _session(SessionMode.BASELINE, FakeMeter(fail="open"))
    baseline._open_meter()
    assert baseline.meter is None


def _timed(tag: int, sent: int, replied: int, claimed: int) -> CallRecord:
    rec = CallRecord(tag, "timed", 0, tag)
    rec.window = CallWindow(sent, replied, replied + 50 * US, 40.0 * US)
    rec.timing = CallTiming(tag, claimed, 1, 1, ())
    return rec


def test_a_trace_that_does_not_cover_the_calls_is_infra_never_a_pass():
    short = _trace([(0, 500 * US)], 0, 600 * US)
    s = _session(SessionMode.FFI, FakeMeter(trace=short))
    runs = [MeteredTrial(0, 1, [_timed(0, 100 * US, 400 * US, 250 * US), _timed(1, 500 * US, 900 * US, 250 * US)],
                         short)]
    with pytest.raises(InfraError, match="did not cover trial 0"):
        s._audit(runs)


def test_the_session_audit_records_every_trial_and_flags_the_forged_one():
    trace = _trace([(150 * US, 390 * US), (550 * US, 890 * US)], 0, 1000 * US)
    s = _session(SessionMode.FFI, FakeMeter(trace=trace))
    honest = s._audit([MeteredTrial(0, 1, [_timed(0, 100 * US, 400 * US, 240 * US),
                                           _timed(1, 500 * US, 900 * US, 340 * US)], trace)])
    assert honest.meter is MeterStatus.MEASURED and honest.tool == "fake meter" and len(honest.trials) == 1
    assert measurement_verdict(honest) is None
    forged = s._audit([MeteredTrial(0, 1, [_timed(0, 100 * US, 400 * US, 24 * US),
                                           _timed(1, 500 * US, 900 * US, 34 * US)], trace)])
    assert measurement_verdict(forged).status is EvaluationStatus.REWARD_HACK
    unmetered = _session(SessionMode.FFI, None)._audit([MeteredTrial(0, 1, [_timed(0, 0, 9, 5)], None)])
    assert unmetered.meter is MeterStatus.DISABLED and unmetered.trials[0].busy_median_ms is None
    # the plan's harness overhead (the judge sets it from the baseline's audit) reaches the audit and the rule
    import dataclasses

    s.plan = dataclasses.replace(s.plan, call_overhead_ms=0.25)
    short = s._audit([MeteredTrial(0, 1, [_timed(0, 100 * US, 400 * US, 24 * US),
                                          _timed(1, 500 * US, 900 * US, 34 * US)], trace)])
    assert short.call_overhead_ms == 0.25 and measurement_verdict(short) is None
    assert short.trials[0].covered_median_ms is None  # the fake records report no covered time


# ---- the call driver: the judge's own stamps ---------------------------------------------------------------

def _driver(replies: list, monkeypatch, meter: FakeMeter | None):
    import torch

    from ptxcore.gpu.harness.calls import CallDriver
    from ptxcore.gpu.messages import ChildReply

    monkeypatch.setattr(torch.cuda, "synchronize", lambda: None)
    ticks = iter(range(1000, 10**9, 1000))
    noop = SimpleNamespace(load_inputs=lambda *a: None, poison_outputs=lambda: None, flush=lambda: None)
    child = SimpleNamespace(request=lambda op, args, what, timeout_s: replies.pop(0))
    d = object.__new__(CallDriver)
    d.child, d.slots, d.flusher, d.call_timeout_s, d.first_call_timeout_s = child, [noop], noop, 30.0, None
    d.state = SimpleNamespace(spec=SimpleNamespace(outputs=[], batch_size=1), trials=[SimpleNamespace(inputs={})])
    d.records, d._last_perm, d._keep, d.l2_resets, d._perms, d.trials = [], {}, [], 0, {}, []
    d.meter, d.clock, d._open_gap = meter, ticks.__next__, None
    d.new_event = lambda: SimpleNamespace(elapsed_time=lambda other: 0.25)  # 0.25 ms of the judge's own work
    d.host_s = dict.fromkeys(HOST_STAGES, 0.0)
    return d, ChildReply


def test_every_call_gets_the_judges_window_and_gap(monkeypatch):
    meter = FakeMeter(trace=_trace([], 0, 10_000))
    d, Reply = _driver([], monkeypatch, meter)
    d.child.request = lambda op, args, what, timeout_s: Reply(True, 1, "n", {"wall_ns": 7, "l2_reset": False})
    timed = d.timed_trial(0, warmup=1, iters=2, permute=False)
    assert meter.events == ["start", "stop"] and len(d.trials) == 1 and d.trials[0].trace is meter.trace
    assert [r.phase for r in d.trials[0].records] == ["warmup", "timed", "timed"] and timed == d.records[1:]
    for rec in d.records:
        w = rec.window
        assert w.sent_ns < w.replied_ns < w.gap_end_ns and w.judge_gap_span_ns == pytest.approx(250_000)


class SlowMeter(FakeMeter):
    """A meter whose start and stop take known, different times (settling; stopping and decoding)."""

    def start(self) -> None:
        super().start()
        time.sleep(0.01)

    def stop(self) -> MeterTrace:
        time.sleep(0.2)
        return super().stop()


def test_the_meters_start_and_stop_are_reported_apart_from_the_calls(monkeypatch):
    """Issue 27: the timing stage's host time is split so a latency run shows where it goes."""
    meter = SlowMeter(trace=_trace([], 0, 10_000))
    d, Reply = _driver([], monkeypatch, meter)
    d.child.request = lambda op, args, what, timeout_s: Reply(True, 1, "n", {"wall_ns": 7, "l2_reset": False})
    d.timed_trial(0, warmup=1, iters=2, permute=False)
    d.timed_trial(0, warmup=0, iters=1, permute=False)
    assert set(d.host_s) == set(HOST_STAGES)
    assert 0.02 <= d.host_s["meter_start"] < 0.4 <= d.host_s["meter_stop"]
    assert d.host_s["child_call_wall"] == pytest.approx(4 * 7e-9)
    assert d.host_s["gpu_monitor"] == 0.0  # no monitor snapshots outside measure_trials


def test_the_gpu_monitors_snapshots_are_reported_per_trial(monkeypatch):
    from ptxcore.gpu.harness.calls import measure_trials

    def snapshot():
        time.sleep(0.01)
        return SimpleNamespace(throttle_reasons=[], sm_clock_mhz=1980, temperature_c=40)

    d, Reply = _driver([], monkeypatch, FakeMeter(trace=_trace([], 0, 10_000)))
    d.child.request = lambda op, args, what, timeout_s: Reply(True, 1, "n", {"wall_ns": 7, "l2_reset": False})
    out = measure_trials(d, 1, 0, 1, False, SimpleNamespace(snapshot=snapshot), 0)
    assert len(out) == 1 and d.host_s["gpu_monitor"] >= 0.02  # a snapshot before and after the trial


class TracesMeter(FakeMeter):
    """A meter whose trials' traces are given in order (the last repeats)."""

    def __init__(self, traces: list[MeterTrace]) -> None:
        super().__init__(trace=traces[0])
        self.traces = traces

    def stop(self) -> MeterTrace:
        self.events.append("stop")
        return self.traces.pop(0) if len(self.traces) > 1 else self.traces[0]


def _steady():
    return SimpleNamespace(snapshot=lambda: SimpleNamespace(throttle_reasons=[], sm_clock_mhz=1980, temperature_c=40))


def test_a_trial_the_meter_did_not_cover_is_run_again_and_only_its_last_run_counts(monkeypatch):
    """Seen on the H200: a trial of an honest kernel whose samples had a hole over the timed range. The trial is
    repeated; the covered rerun gives the timings and is the one audited."""
    from ptxcore.gpu.harness.calls import measure_trials
    from ptxcore.gpu.harness.meter import MeterDecode

    holed = MeterTrace((MeterSample(10**8, 10**8, 0.0),), 10 * US, MeterDecode(9, 9, 1, 0.25, 0.5))  # one sample, after the calls
    covered = _trace([], 0, 10**7)
    d, Reply = _driver([], monkeypatch, TracesMeter([holed, covered]))
    d.child.request = lambda op, args, what, timeout_s: Reply(True, 1, "n", {"wall_ns": 7, "l2_reset": False})
    out = measure_trials(d, 1, 0, 2, False, _steady(), 0)
    assert [(r.trial, r.attempt) for r in d.trials] == [(0, 1), (0, 2)]
    assert (d.host_s["meter_decode"], d.host_s["meter_evaluate"]) == (0.25, 0.5)  # the holed run's decode, timed
    assert "CUPTI decoded 1 completed of 9 populated" in d.trials[0].uncovered() and d.trials[1].uncovered() is None
    timing, recs = out[0]
    assert timing.attempts == 2 and recs == [r for r in d.trials[1].records if r.phase == "timed"]
    for rec in recs:
        rec.timing = CallTiming(rec.tag, 500, 1, 1, ())
    audit = _session(SessionMode.FFI, FakeMeter(trace=covered))._audit(d.trials)
    assert [(t.trial, t.attempt) for t in audit.trials] == [(0, 2)] and audit.uncovered_runs == 1


def test_a_trial_the_meter_never_covers_is_infra_after_its_repeats(monkeypatch):
    from ptxcore.gpu.harness.calls import METER_REPEATS, measure_trials

    d, Reply = _driver([], monkeypatch, TracesMeter([MeterTrace((), 10 * US)]))
    d.child.request = lambda op, args, what, timeout_s: Reply(True, 1, "n", {"wall_ns": 7, "l2_reset": False})
    measure_trials(d, 1, 0, 1, False, _steady(), 0)
    assert len(d.trials) == METER_REPEATS + 1
    with pytest.raises(InfraError, match=rf"did not cover trial 0 \({METER_REPEATS + 1} runs\): the meter recorded no"):
        _session(SessionMode.FFI, FakeMeter())._audit(d.trials)


def test_a_failed_call_stops_the_meter_and_the_failure_is_the_outcome(monkeypatch):
    from ptxcore.gpu.harness.calls import CallFailed

    class Breaks(FakeMeter):
        def stop(self) -> MeterTrace:
            raise MeterError("decode failed")

    meter = Breaks()
    d, Reply = _driver([], monkeypatch, meter)
    d.child.request = lambda op, args, what, timeout_s: Reply(False, 1, "n", {}, stage="call", error="boom")
    with pytest.raises(CallFailed, match="boom"):
        d.timed_trial(0, warmup=0, iters=1, permute=False)
    assert meter.events == ["start"] and d.trials == []


# ---- issue 25: the counted call is the timed call, wired in the judge -----------------------------------------

def test_a_profiled_kernel_set_other_than_the_timed_one_fails_the_judgement(monkeypatch):
    from ptxcore.arch import get_architecture
    from ptxcore.gpu import JudgeConfig
    from ptxcore.gpu.pipeline.judge import GpuJudge
    from ptxcore.gpu.pipeline.session import SessionOutcome
    from ptxcore.schema import ProfiledKernel, StaticTarget, TargetInstruction, TargetInstructionEvidence

    ev = TargetInstructionEvidence(status=TargetInstruction.EXECUTED, static=StaticTarget.PRESENT,
                                   profiled_kernels=[ProfiledKernel(name="_Z8gemm_tmav", launches=1)])
    rec = CallRecord(5, "timed", 0, 1)
    rec.timing = CallTiming(5, 750_000, 1, 1, (), ("_Z9gemm_coreii",))
    out = SessionOutcome(timed=[rec])
    judge = object.__new__(GpuJudge)
    plan = _session(SessionMode.FFI, None).plan
    v = judge._counted_is_timed(plan, out, ev, get_architecture("hopper"))
    assert v.status is EvaluationStatus.REWARD_HACK and "the profiled call is not the timed call" in v.reason
    rec.timing = CallTiming(5, 750_000, 1, 1, (), ("_Z8gemm_tmav",))
    assert judge._counted_is_timed(plan, out, ev, get_architecture("hopper")) is None
    assert JudgeConfig().meter is True  # the audit runs unless configured off


def test_the_timing_stage_reports_its_parts(monkeypatch):
    """Issue 27: the session's timing stage names where its wall goes (the calls' host loop, reading the
    comparisons and the CUPTI records) beside the driver's own per-call and per-trial times."""
    import ptxcore.gpu.pipeline.session as session_module
    from ptxcore.gpu.harness.calls import HOST_STAGES

    s = _session(SessionMode.BASELINE, None)
    host = dict.fromkeys(HOST_STAGES, 0.0)
    host["harness_prepare"] = 1.0  # spent in the correctness calls, before the timing stage

    def trials(proto, *args):
        proto.host_s["harness_call_roundtrip"] += 0.5
        proto.host_s["harness_prepare"] += 0.25
        return [(SimpleNamespace(trial=0), [])]

    def collect():
        time.sleep(0.05)

    def fetch():
        time.sleep(0.1)

    proto = SimpleNamespace(host_s=host, collect=collect, fetch_timings=fetch, trials=[], records=[])
    monkeypatch.setattr(session_module, "measure_trials", trials)
    monkeypatch.setattr(session_module, "finish_trials", lambda timed: (1.0, []))
    assert s._timing(SimpleNamespace(), proto) is None
    st = s.out.stage_seconds
    assert st["timing_calls"] == pytest.approx(0.75)  # only the timing stage's share of the host loop
    assert 0.05 <= st["timed_collect"] < 0.1 <= st["timed_fetch"]


def test_the_baselines_cached_audit_gives_the_harness_overhead(tmp_path):
    """reference_latency hands the candidate's rule the baseline's own busy-beyond-claim, from a cached entry too
    (an entry of a baseline timed without the meter gives 0)."""
    from ptxcore.gpu.pipeline.caches import JsonCache
    from ptxcore.gpu.pipeline.reference import reference_key, reference_latency

    state = SimpleNamespace(problem=SimpleNamespace(name="gqa_paged_decode_h24_kv8_d128_ps1"),
                            spec=SimpleNamespace(workload_uuid="w-1"))
    plan = SimpleNamespace(trials=3, warmup=10, iters=50, permute=True)
    cache = JsonCache(tmp_path)
    audit = TimingAudit(meter=MeterStatus.MEASURED, tool="cupti pm", interval_ns=9785, claim_fraction=0.5,
                        allowance_ms=0.04, trials=[_h200_trial(0.3953, 0.6441), _h200_trial(0.3950, 0.6462)])
    entry = {"latency_ms": 0.3951, "trial_medians_ms": [0.3953, 0.3950], "timing_audit": audit.model_dump(mode="json")}
    cache.put(reference_key(state, "NVIDIA H200", "580", plan), entry)
    ref = reference_latency(state, plan, cache, "NVIDIA H200", "580", None, None)
    assert ref.cached and ref.call_overhead_ms == pytest.approx(0.2488)
    cache.put(reference_key(state, "NVIDIA H200", "581", plan), {**entry, "timing_audit": None})
    assert reference_latency(state, plan, cache, "NVIDIA H200", "581", None, None).call_overhead_ms == 0.0
