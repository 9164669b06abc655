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
