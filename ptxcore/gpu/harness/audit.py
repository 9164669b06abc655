"""The timing audit of one trial: the spans the candidate's process claimed against the judge's own figures.

Per call the judge knows, from its own process: the call's window (the meter clock read just before the
request is written and just after the reply is read), the GPU-busy time the device meter saw inside that
window, and the busy time it saw between the reply and the next call beyond the span of the judge's own work
there (CUDA events on the judge's stream around its comparisons and the next call's input staging). Work a
candidate leaves running after its reply (a harness patched to answer early) lands in that second term, since
contexts time-slice and the judge's comparison of the call's outputs cannot run before it without reading
half-written outputs. Pure: no GPU needed.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

from ptxcore.gpu.harness.meter import MeterTrace
from ptxcore.schema import TrialAudit

FIXED_ALLOWANCE_NS = 20_000
"""Margin per call on top of two sampling intervals (the interval error at each end of a window)."""


@dataclass(frozen=True)
class CallWindow:
    """The judge's own stamps around one call, in the meter's clock (ns)."""

    sent_ns: int
    replied_ns: int
    gap_end_ns: int | None = None
    """When the judge's work after the call ended (its next synchronisation), None until known."""
    judge_gap_span_ns: float | None = None
    """Span of the judge's own GPU work between the reply and gap_end (CUDA events), ns."""

    @property
    def window_ns(self) -> int:
        return self.replied_ns - self.sent_ns


@dataclass(frozen=True)
class AuditedCall:
    tag: int
    claimed_ns: int
    window_ns: int
    busy_ns: float | None
    after_ns: float | None
    tensor_ns: float | None
    covered_ns: int = 0
    """The union of the call's record intervals as its process reported it (0: not reported)."""


def allowance_ns(interval_ns: int) -> int:
    return 2 * interval_ns + FIXED_ALLOWANCE_NS


def audit_call(tag: int, claimed_ns: int, win: CallWindow, trace: MeterTrace | None,
               covered_ns: int = 0) -> AuditedCall:
    """One call's figures; without a trace only the claim, the window and the covered time."""
    if trace is None:
        return AuditedCall(tag, claimed_ns, win.window_ns, None, None, None, covered_ns)
    busy = trace.busy_ns(win.sent_ns, win.replied_ns)
    tensor = trace.tensor_ns(win.sent_ns, win.replied_ns)
    after = 0.0
    if win.gap_end_ns is not None and win.judge_gap_span_ns is not None:
        gap_busy = trace.busy_ns(win.replied_ns, win.gap_end_ns)
        after = max(0.0, gap_busy - win.judge_gap_span_ns - trace.interval_ns)
    return AuditedCall(tag, claimed_ns, win.window_ns, busy + after, after, tensor, covered_ns)


def trial_audit(trial: int, attempt: int, calls: list[AuditedCall]) -> TrialAudit:
    """The trial's medians (timed calls only are passed in)."""
    if not calls:
        raise ValueError("a trial audit needs at least one call")
    metered = calls[0].busy_ns is not None
    busy_total = sum(c.busy_ns or 0.0 for c in calls)
    tensor = [c.tensor_ns for c in calls]
    share = None
    if metered and busy_total > 0 and all(t is not None for t in tensor):
        share = min(1.0, sum(tensor) / busy_total)  # type: ignore[arg-type]
    return TrialAudit(
        trial=trial, attempt=attempt, timed_calls=len(calls),
        claimed_median_ms=statistics.median(c.claimed_ns for c in calls) / 1e6,
        window_median_ms=statistics.median(c.window_ns for c in calls) / 1e6,
        busy_median_ms=statistics.median(c.busy_ns for c in calls) / 1e6 if metered else None,
        busy_after_return_ms=sum(c.after_ns or 0.0 for c in calls) / 1e6 if metered else None,
        tensor_active_share=share,
        covered_median_ms=(statistics.median(c.covered_ns for c in calls) / 1e6
                           if all(c.covered_ns > 0 for c in calls) else None))


def forged_trial(audit: TrialAudit, fraction: float, allowance_ms: float, overhead_ms: float = 0.0) -> str | None:
    """Why the trial's claim cannot be the GPU work the judge measured, None when it can. `overhead_ms`: busy time
    per call that is no candidate's work (the trusted baseline's own busy time beyond what its records cover, on
    this workload and host: `reference_call_overhead_ms`), taken off the busy median before the fraction applies."""
    if audit.busy_median_ms is None:
        return None
    floor = fraction * max(0.0, audit.busy_median_ms - overhead_ms) - allowance_ms
    if audit.claimed_median_ms < floor:
        less = f", less {overhead_ms:.4f} ms of the harness's own per-call busy time" if overhead_ms else ""
        return (f"the candidate's process reported {audit.claimed_median_ms:.4f} ms per call, but the judge's own "
                f"device meter saw the GPU busy {audit.busy_median_ms:.4f} ms per call (trial {audit.trial}, "
                f"attempt {audit.attempt}; a claim under {fraction:g} x busy{less} - {allowance_ms * 1e3:.0f} us "
                "is not the work that ran)")
    return None


def reference_call_overhead_ms(trials: list[dict] | list[TrialAudit]) -> float:
    """The GPU-busy time per call that the harness itself costs on this host: the trusted baseline's busy median
    minus the median time its records cover (their union; its claimed span where a trial has none: a span with
    idle gaps understates the figure), the least over its trials (0 when not metered). On the H200 (2026-12-02) every
    metered call showed 0.16-0.30 ms of busy time beyond its kernels' spans (candidates and baselines alike,
    from 0.09 ms decode kernels to 666 ms spinners), which made the 0.5 rule accuse honest kernels under ~0.17 ms."""
    rows = [t if isinstance(t, dict) else t.model_dump() for t in trials]
    gaps = [r["busy_median_ms"] - (r.get("covered_median_ms") or r["claimed_median_ms"])
            for r in rows if r.get("busy_median_ms") is not None]
    return max(0.0, min(gaps)) if gaps else 0.0
