"""benchmarks/judge_latency.py's report from hand-written stage times (test inputs, not measurements): the stage
table, the timing stage's parts, and the meter's stop split into decode and metric evaluation (issue 27)."""

from __future__ import annotations

import sys

from tests.scripts import load_script

from .test_env_steps import REPO


def _load():
    sys.path.insert(0, str(REPO / "benchmarks"))
    return load_script(REPO / "benchmarks" / "judge_latency.py", "judge_latency")


def _judged(wall_s: float, **stages: float) -> dict:
    return {"wall_s": wall_s, "status": "PASSED", "target": "executed", "counts": {"gmma": 1},
            "stages": {"timing": 3.0, "meter_stop": 2.0, **stages}}


def test_the_meters_stop_is_split_into_decode_and_evaluation():
    jl = _load()
    new = [_judged(20.0, meter_decode=0.5, meter_evaluate=1.2), _judged(22.0, meter_decode=0.7, meter_evaluate=1.4)]
    arm = {"arm": "overlapped", "cold": _judged(30.0), "latency": new, "prebuilt": [],
           "stream": {"per_gpu_minute": None}}
    text = jl.report([arm])
    lines = text.splitlines()
    head = lines.index("the meter's stop, by part (median s):")
    assert lines[head + 1].split() == ["arm", "meter_stop", "meter_decode", "meter_evaluate", "other"]
    row = lines[head + 3].split()
    assert row[0] == "overlapped" and [float(v) for v in row[1:]] == [2.0, 0.6, 1.3, 0.1]


def test_without_the_split_no_stop_table_is_printed():
    """Envelopes from before the split (no meter_decode) give no half-filled table."""
    jl = _load()
    arm = {"arm": "sequential", "cold": _judged(30.0), "latency": [_judged(20.0)], "prebuilt": [],
           "stream": {"per_gpu_minute": None}}
    assert "the meter's stop, by part" not in jl.report([arm])


def test_the_correctness_stage_is_split_into_its_parts():
    """meter_open + child_start + load, the rest as calls and checks; the meter's configuration beside them."""
    jl = _load()
    new = [_judged(8.0, correctness=0.8, meter_open=0.1, child_start=0.3, load=0.1, meter_configure=0.3),
           _judged(8.2, correctness=0.6, meter_open=0.1, child_start=0.1, load=0.1, meter_configure=0.3)]
    arm = {"arm": "waiting-child", "cold": _judged(30.0), "latency": new, "prebuilt": [],
           "stream": {"per_gpu_minute": None}}
    lines = jl.report([arm]).splitlines()
    head = lines.index("correctness stage of the new candidates, by part (median s):")
    assert lines[head + 1].split()[:4] == ["arm", "meter_open", "child_start", "load"]
    row = lines[head + 3].split()
    assert row[0] == "waiting-child" and [float(v) for v in row[1:]] == [0.1, 0.2, 0.1, 0.3, 0.3]


def test_the_time_around_the_session_is_shown_once_recorded():
    jl = _load()
    new = [_judged(9.0, build=5.0, prepare=0.1, session=3.0, slots=0.05, session_close=0.2, verdict=0.3, total=8.6)]
    arm = {"arm": "waiting-child", "cold": _judged(30.0), "latency": new, "prebuilt": [],
           "stream": {"per_gpu_minute": None}}
    lines = jl.report([arm]).splitlines()
    head = lines.index("around the session (median s):")
    row = lines[head + 3].split()
    assert row[0] == "waiting-child" and row[1] == row[3] == "-"  # no close_wait, no tools_prepare recorded
    assert [float(v) for k, v in enumerate(row[1:]) if k not in (0, 2)] == [0.1, 0.05, 0.2, 0.3, 0.2]
    prepared = {**arm, "latency": [_judged(9.0, build=5.0, close_wait=0.01, prepare=0.1, tools_prepare=0.02,
                                           session=3.0, slots=0.05, session_close=0.2, verdict=0.3, total=8.6)]}
    row = jl.report([prepared]).splitlines()[head + 3].split()
    assert [float(v) for v in row[1:]] == [0.01, 0.1, 0.02, 0.05, 0.2, 0.3, 0.17]  # the rest less both
    old = {**arm, "latency": [_judged(9.0, build=5.0)]}
    assert "around the session" not in jl.report([old])


def test_an_arm_named_twice_pools_its_candidates_for_the_ratio():
    """A B B A: two arms, each run twice; the ratio is of the medians over each arm's candidates."""
    jl = _load()

    def arm(name, *walls):
        return {"arm": name, "cold": _judged(30.0), "latency": [_judged(w) for w in walls], "prebuilt": [],
                "stream": {"per_gpu_minute": None}}

    text = jl.report([arm("waiting-child", 10.0, 10.4), arm("prepared-tools", 9.0), arm("prepared-tools", 9.4),
                      arm("waiting-child", 10.2)])
    assert "new-candidate wall, prepared-tools / waiting-child: 0.902 (medians of 2 and 3 candidates)" in text
