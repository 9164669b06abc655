"""CUPTI record attribution (pure) and the timing statistics."""

from __future__ import annotations

import pytest

from ptxcore.gpu.child.cupti import (
    ActivityRecord,
    CallWindow,
    assign_records,
    mean_of_medians_ms,
    trial_median_ms,
)


def _k(start: int, end: int, stream: int = 7, name: str = "k") -> ActivityRecord:
    return ActivityRecord("kernel", name, start, end, stream)


def test_span_covers_all_records_of_a_call_on_every_stream():
    windows = [CallWindow(0, 100, 200), CallWindow(1, 300, 400)]
    records = [_k(110, 150), _k(120, 190, stream=9, name="side"), _k(310, 330), _k(335, 360)]
    calls, stray = assign_records(windows, records, env_streams={7})
    assert [c.span_ns for c in calls] == [80, 50]
    assert calls[0].off_stream == ("side",) and calls[1].off_stream == ()
    assert calls[0].kernels == 2 and stray == []
    # the covered time: overlapping records counted once, the gap between the second call's kernels not at all
    assert [c.active_ns for c in calls] == [80, 45]


def test_the_covered_time_travels_and_a_row_cannot_claim_more_than_its_span():
    from ptxcore.gpu.messages import ProtocolViolation, TimingRow

    row = TimingRow(4, 50, 2, 2, (), ("k",), 45)
    assert TimingRow.from_wire(row.to_wire()) == row
    wire = row.to_wire()
    del wire["active_ns"]
    assert TimingRow.from_wire(wire).active_ns == 0  # an older child's row: not reported
    for bad in (51, -1, 4.5, True, "45"):
        with pytest.raises(ProtocolViolation, match="covered time"):
            TimingRow.from_wire({**row.to_wire(), "active_ns": bad})


def test_records_outside_every_window_are_stray():
    calls, stray = assign_records([CallWindow(0, 100, 200)], [_k(50, 60), _k(150, 250), _k(120, 130)], {7})
    assert calls[0].span_ns == 10
    assert sorted(r.start_ns for r in stray) == [50, 150]


def test_call_without_records_has_zero_span():
    calls, _ = assign_records([CallWindow(3, 0, 10)], [], {7})
    assert calls[0].span_ns == 0 and calls[0].records == 0


def test_median_per_trial_then_mean():
    assert trial_median_ms([3_000_000, 1_000_000, 2_000_000]) == pytest.approx(2.0)
    assert mean_of_medians_ms([1.0, 2.0, 4.5]) == pytest.approx(2.5)
