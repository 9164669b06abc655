"""research/timing/ncu_phases.py's table from hand-written stamps (test inputs, not measurements)."""

from __future__ import annotations

from research.timing.ncu_phases import PHASES, table


def test_the_table_gives_times_from_the_request_and_each_steps_own():
    run = {p: float(i) for i, p in enumerate(PHASES)}  # request 0, seen 1, ... exit 7
    slow = {**run, "exit": 9.0}
    text = table({"ncu": [run, slow, run]})
    lines = text.splitlines()
    assert lines[0] == "seconds from the request (medians)"
    assert lines[3].split() == ["ncu", "1.000", "2.000", "3.000", "4.000", "5.000", "6.000", "7.000"]
    own = lines[-1].split()
    assert own[0] == "ncu" and own[1:] == ["1.000"] * 7
