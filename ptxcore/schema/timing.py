"""The timing audit: what the judge measured itself, beside what the candidate's process claimed."""

from __future__ import annotations

from enum import StrEnum

from pydantic import Field, model_validator

from .base import FrozenModel


class MeterStatus(StrEnum):
    MEASURED = "measured"
    """The judge's device meter (out of the candidate's process) measured every timed trial."""
    DISABLED = "disabled"
    """The meter was configured off: the latency is the candidate process's claim, bounded only by the judge's
    own call windows."""


class TrialAudit(FrozenModel):
    """One timed trial (one attempt of it): the candidate's claim against the judge's own measurements."""

    trial: int = Field(ge=0)
    """Trial index."""
    attempt: int = Field(ge=1)
    """Attempt (a throttled trial is repeated)."""
    timed_calls: int = Field(ge=1)
    """Timed calls audited."""
    claimed_median_ms: float = Field(ge=0.0)
    """Median span per timed call as the candidate's process reported it (its CUPTI records), ms."""
    window_median_ms: float = Field(ge=0.0)
    """Median time per timed call from the judge sending the request to reading the reply, ms (includes the
    channel and the candidate's host code)."""
    busy_median_ms: float | None = Field(default=None, ge=0.0)
    """Median GPU-busy time per timed call in the judge's device meter, ms: busy time inside the call's window
    plus any busy time after the reply beyond the judge's own work. None: no meter."""
    busy_after_return_ms: float | None = Field(default=None, ge=0.0)
    """Busy time the meter saw after the replies of the trial's calls beyond the judge's own work, summed, ms."""
    covered_median_ms: float | None = Field(default=None, ge=0.0)
    """Median GPU time per timed call the process's records cover (the union of their intervals, at most the
    claimed span; a span with idle gaps between launches claims more), ms. None: not reported."""
    tensor_active_share: float | None = Field(default=None, ge=0.0, le=1.0)
    """Fraction of the metered busy time of the timed calls during which the tensor pipe was active (SM
    average). None: no meter, or the device did not give the counters."""


class TimingAudit(FrozenModel):
    """How the latency was checked: the rule, the meter, and every trial's figures."""

    meter: MeterStatus
    """Whether the judge's device meter measured the timed trials."""
    tool: str | None = None
    """The meter and its version (None when disabled)."""
    interval_ns: int | None = Field(default=None, gt=0)
    """Sampling interval of the meter, ns (None when disabled)."""
    claim_fraction: float = Field(gt=0.0, le=1.0)
    """The rule: a trial whose claimed median is below this fraction of the metered busy median, minus the
    allowance, is REWARD_HACK."""
    allowance_ms: float = Field(ge=0.0)
    """The rule's absolute allowance per call, ms (two sampling intervals plus a fixed margin)."""
    call_overhead_ms: float = Field(default=0.0, ge=0.0)
    """Busy time per call that is not the candidate's work, taken off each trial's busy median before the rule
    (the trusted baseline's own busy beyond the time its records cover, on this workload and host; the rule caps it
    at overhead_bound_ms), ms; 0: none known."""
    overhead_bound_ms: float = Field(default=0.0, ge=0.0)
    """The most harness busy time per call the rule allows for, ms: a claim below the floor after this much is
    forged, one below the floor after call_overhead_ms (capped at this) but not below this one's is inconclusive
    (INFRA_ERROR); 0 (older records): the floor after call_overhead_ms decides alone."""
    trials: list[TrialAudit] = Field(default_factory=list)
    """Every timed trial attempt, in order (a run the meter did not cover and that was run again is not one)."""
    uncovered_runs: int = Field(default=0, ge=0)
    """Trial runs the meter's trace did not cover, each run again (ptxcore.gpu.harness.calls.METER_REPEATS);
    their timings are not used."""

    @model_validator(mode="after")
    def _meter_fields(self) -> TimingAudit:
        measured = self.meter is MeterStatus.MEASURED
        if measured != (self.tool is not None and self.interval_ns is not None):
            raise ValueError("a measured audit names its tool and interval, a disabled one neither")
        if any((t.busy_median_ms is not None) != measured for t in self.trials):
            raise ValueError("metered busy time belongs to every trial of a measured audit and to none otherwise")
        return self
