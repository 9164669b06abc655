"""Kernel timing from CUPTI activity records, and the statistics of the protocol.

The child brackets every call with CUPTI timestamps after a device synchronisation on both sides, so the
activity records (kernels, memcpys, memsets on *any* stream) that fall inside a window belong to that
call. A call's latency is the span from its first record's start to its last record's end.
Record handling is pure (testable without a GPU); `CuptiRecorder` is the thin cupti-python adapter.
"""

from __future__ import annotations

import statistics
import threading
from dataclasses import dataclass

MAX_KERNEL_NAMES = 64
"""Distinct kernel names reported per call; more than this is reported with an overflow marker."""


@dataclass(frozen=True)
class ActivityRecord:
    """One GPU activity (kernel, memcpy or memset), CUPTI timestamps in ns."""

    kind: str
    name: str
    start_ns: int
    end_ns: int
    stream_id: int


@dataclass(frozen=True)
class CallWindow:
    """Host-side CUPTI timestamps around one call (device synchronised at both ends)."""

    tag: int
    t0_ns: int
    t1_ns: int


@dataclass(frozen=True)
class CallTiming:
    """What one call ran on the GPU."""

    tag: int
    span_ns: int
    records: int
    kernels: int
    off_stream: tuple[str, ...]
    """Names of kernels/copies launched on a stream other than the TVM-FFI environment stream."""
    kernel_names: tuple[str, ...] = ()
    """Distinct names of the kernels the call ran (at most MAX_KERNEL_NAMES, then one `...` marker that is no
    kernel's name)."""
    active_ns: int = 0
    """GPU time the call's records cover: the union of their intervals, at most span_ns (0: not reported)."""


def assign_records(
    windows: list[CallWindow], records: list[ActivityRecord], env_streams: set[int]
) -> tuple[list[CallTiming], list[ActivityRecord]]:
    """Attribute records to windows; returns per-call timings and the records outside every window."""
    ordered = sorted(windows, key=lambda w: w.t0_ns)
    buckets: dict[int, list[ActivityRecord]] = {w.tag: [] for w in ordered}
    stray: list[ActivityRecord] = []
    for rec in sorted(records, key=lambda r: r.start_ns):
        win = _find_window(ordered, rec.start_ns)
        if win is None or rec.end_ns > win.t1_ns:
            stray.append(rec)
        else:
            buckets[win.tag].append(rec)
    timings = []
    for w in ordered:
        recs = buckets[w.tag]
        span = (max(r.end_ns for r in recs) - min(r.start_ns for r in recs)) if recs else 0
        off = tuple(sorted({r.name for r in recs if r.stream_id not in env_streams}))
        kernels = sum(1 for r in recs if r.kind == "kernel")
        timings.append(CallTiming(w.tag, span, len(recs), kernels, off, _kernel_names(recs), _covered_ns(recs)))
    return timings, stray


def _covered_ns(recs: list[ActivityRecord]) -> int:
    """The union of the records' intervals (overlapping kernels and copies counted once), ns."""
    total, end = 0, None
    for r in sorted(recs, key=lambda r: r.start_ns):
        if end is None or r.start_ns > end:
            total += r.end_ns - r.start_ns
            end = r.end_ns
        elif r.end_ns > end:
            total += r.end_ns - end
            end = r.end_ns
    return total


def _kernel_names(recs: list[ActivityRecord]) -> tuple[str, ...]:
    names = sorted({r.name for r in recs if r.kind == "kernel"})
    if len(names) > MAX_KERNEL_NAMES:
        return (*names[:MAX_KERNEL_NAMES], f"... {len(names) - MAX_KERNEL_NAMES} more kernels")
    return tuple(names)


def _find_window(ordered: list[CallWindow], t: int) -> CallWindow | None:
    lo, hi = 0, len(ordered) - 1
    while lo <= hi:
        mid = (lo + hi) // 2
        w = ordered[mid]
        if t < w.t0_ns:
            hi = mid - 1
        elif t > w.t1_ns:
            lo = mid + 1
        else:
            return w
    return None


def trial_median_ms(spans_ns: list[int]) -> float:
    return statistics.median(spans_ns) / 1e6


def mean_of_medians_ms(medians_ms: list[float]) -> float:
    return statistics.fmean(medians_ms)


class CuptiRecorder:
    """Collects kernel / memcpy / memset activity with cupti-python (imported lazily)."""

    KINDS = ("CONCURRENT_KERNEL", "MEMCPY", "MEMSET")
    BUFFER_BYTES = 8 * 1024 * 1024

    def __init__(self) -> None:
        from cupti import cupti

        self._cupti = cupti
        self._lock = threading.Lock()
        self._records: list[ActivityRecord] = []
        cupti.activity_register_callbacks(self._requested, self._completed)
        for kind in self.KINDS:
            cupti.activity_enable(getattr(cupti.ActivityKind, kind))

    def _requested(self) -> tuple[int, int]:  # cupti's buffer-request callback: (size, max records)
        return self.BUFFER_BYTES, 0

    def _completed(self, activities: list) -> None:  # cupti's buffer-completed callback
        kinds = self._cupti.ActivityKind
        out = []
        for a in activities:
            if a.kind in (kinds.CONCURRENT_KERNEL, kinds.KERNEL):
                out.append(ActivityRecord("kernel", str(a.name), int(a.start), int(a.end), int(a.stream_id)))
            elif a.kind == kinds.MEMCPY:
                out.append(ActivityRecord("memcpy", "memcpy", int(a.start), int(a.end), int(a.stream_id)))
            elif a.kind == kinds.MEMSET:
                out.append(ActivityRecord("memset", "memset", int(a.start), int(a.end), int(a.stream_id)))
        with self._lock:
            self._records.extend(out)

    def now_ns(self) -> int:
        return int(self._cupti.get_timestamp())

    def drain(self) -> list[ActivityRecord]:
        """Flush CUPTI's buffers and hand over every record collected so far."""
        self._cupti.activity_flush_all(1)
        with self._lock:
            out, self._records = self._records, []
        return out
