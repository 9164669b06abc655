"""Reference latency: the baseline library timed exactly like a candidate (same child, buffers, L2
flush, verification and CUPTI spans), cached per (definition, workload, GPU model, driver, protocol)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ptxcore.gpu.errors import InfraError
from ptxcore.gpu.harness.audit import reference_call_overhead_ms
from ptxcore.gpu.harness.state import WorkloadState
from ptxcore.gpu.pipeline.caches import JsonCache, cache_key
from ptxcore.gpu.pipeline.session import CandidateSession, SessionPlan

if TYPE_CHECKING:
    from ptxcore.gpu.harness.l2 import L2Flusher
    from ptxcore.gpu.harness.meter import DeviceMeter
    from ptxcore.gpu.harness.monitor import GpuMonitor

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ReferenceTiming:
    latency_ms: float
    trial_medians_ms: tuple[float, ...]
    cached: bool
    throttle_reasons: tuple[str, ...]
    call_overhead_ms: float = 0.0
    """The harness's own GPU-busy time per call, from this measurement's audit (`reference_call_overhead_ms`):
    the candidate's measurement rule takes it off the busy time (0 when the baseline was not metered)."""


def _overhead(audit: dict | None) -> float:
    return reference_call_overhead_ms((audit or {}).get("trials") or [])


def reference_key(state: WorkloadState, gpu_name: str, driver: str, plan: SessionPlan) -> str:
    protocol = f"t{plan.trials}w{plan.warmup}i{plan.iters}p{int(plan.permute)}"
    return cache_key("reference-v1", state.problem.name, state.spec.workload_uuid, gpu_name, driver, protocol)


def reference_latency(state: WorkloadState, plan: SessionPlan, cache: JsonCache, gpu_name: str, driver: str,
                      flusher: L2Flusher, monitor: GpuMonitor, meter: DeviceMeter | None = None,
                      before_timing: Callable[[], None] | None = None) -> ReferenceTiming:
    """The baseline's latency (cached); a fresh measurement is also audited by the device meter (trusted code:
    the audit is kept in the cache entry as the honest ratio of claim to busy time, never a verdict).
    `before_timing` runs before a fresh measurement only (the judge ends its waiting session child there, so
    that the baseline, like a candidate, is timed with no other process on the GPU)."""
    key = reference_key(state, gpu_name, driver, plan)
    hit = cache.get(key)
    if hit is not None:
        return ReferenceTiming(hit["latency_ms"], tuple(hit["trial_medians_ms"]), True,
                               tuple(hit.get("throttle_reasons", [])), _overhead(hit.get("timing_audit")))
    if before_timing is not None:
        before_timing()
    out = CandidateSession(plan, state, flusher, monitor, meter).run()
    if out.verdict is not None or out.latency_ms <= 0:
        reason = out.verdict.reason if out.verdict else "no kernel time recorded"
        raise InfraError(f"baseline {state.problem.extension.baseline.implementation} failed its own "
                         f"protocol: {reason} {out.log[-500:]}".strip())
    reasons = sorted({r for t in out.trials for r in t.throttle_reasons})
    value = {"latency_ms": out.latency_ms, "trial_medians_ms": [t.median_ms for t in out.trials],
             "problem": state.problem.name, "workload": state.spec.workload_uuid, "gpu": gpu_name,
             "driver": driver, "throttle_reasons": reasons,
             "timing_audit": out.audit.model_dump(mode="json") if out.audit is not None else None}
    if not reasons:  # a throttled measurement is reported but never cached
        cache.put(key, value)
    overhead = _overhead(value["timing_audit"])
    log.info("reference %s: %.4f ms (harness busy %.4f ms a call)", state.problem.name, out.latency_ms, overhead)
    return ReferenceTiming(out.latency_ms, tuple(value["trial_medians_ms"]), False, tuple(reasons), overhead)
