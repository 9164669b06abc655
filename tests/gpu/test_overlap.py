"""The tool stages before timing (issue 27): memcheck and the counting run side by side, both ended before the
first timed call, with the sequential order's verdicts and errors."""

from __future__ import annotations

import threading
import time

import pytest

from ptxcore.gpu.errors import InfraError
from ptxcore.gpu.pipeline.overlap import ToolsBeforeTiming
from ptxcore.gpu.pipeline.verdicts import Verdict
from ptxcore.schema import EvaluationStatus, TargetInstruction, TargetInstructionEvidence

EXECUTED = TargetInstructionEvidence(status=TargetInstruction.EXECUTED, reason="counted")


class Stages:
    def __init__(self) -> None:
        self.seen: dict[str, float] = {}

    def stage(self, name: str, seconds: float) -> None:
        self.seen[name] = self.seen.get(name, 0.0) + seconds


def test_memcheck_and_the_counting_run_run_at_the_same_time_and_both_end_before_timing():
    both = threading.Barrier(2, timeout=10)  # breaks (BrokenBarrierError) unless the two run concurrently
    running: set[str] = set()

    def gate(out):
        running.add("memcheck")
        both.wait()
        time.sleep(0.05)
        running.discard("memcheck")
        return None

    def evidence(out):
        running.add("ncu")
        both.wait()
        time.sleep(0.1)
        running.discard("ncu")
        return EXECUTED

    r = Stages()
    tools = ToolsBeforeTiming(gate, evidence, r, overlap=True)
    assert tools(object()) is None
    assert running == set()  # nothing is left running when timing starts
    assert tools.target(object()) is EXECUTED
    assert set(r.seen) == {"memcheck", "ncu"} and r.seen["ncu"] >= 0.1


def test_a_memcheck_verdict_is_the_gates_verdict_and_the_counting_run_is_not_repeated():
    calls = []

    def evidence(out):
        calls.append(1)
        return EXECUTED

    bad = Verdict(EvaluationStatus.RUNTIME_ERROR, "compute-sanitizer memcheck found 3 memory error(s)")
    tools = ToolsBeforeTiming(lambda out: bad, evidence, Stages(), overlap=True)
    assert tools(object()) is bad
    assert tools.target(object()) is EXECUTED and calls == [1]


def test_an_infrastructure_error_of_either_tool_surfaces_where_the_sequential_order_raises_it():
    def broken(out):
        raise InfraError("compute-sanitizer gave no verdict in 2 run(s)")

    tools = ToolsBeforeTiming(broken, lambda out: EXECUTED, Stages(), overlap=True)
    with pytest.raises(InfraError, match="no verdict"):
        tools(object())

    def no_ncu(out):
        raise InfraError("ncu crashed")

    tools = ToolsBeforeTiming(lambda out: None, no_ncu, Stages(), overlap=True)
    assert tools(object()) is None  # the gate passed; the counting run's failure belongs to the evidence step
    with pytest.raises(InfraError, match="ncu crashed"):
        tools.target(object())


def test_the_sequential_order_counts_after_timing_and_without_a_gate_runs_nothing_before_it():
    order = []
    tools = ToolsBeforeTiming(lambda out: order.append("memcheck"), lambda out: order.append("ncu") or EXECUTED,
                              Stages(), overlap=False)
    assert tools.active
    tools(object())
    assert order == ["memcheck"]
    assert tools.target(object()) is EXECUTED and order == ["memcheck", "ncu"]
    assert not ToolsBeforeTiming(None, lambda out: EXECUTED, Stages(), overlap=False).active
    assert ToolsBeforeTiming(None, lambda out: EXECUTED, Stages(), overlap=True).active  # counting alone, before timing


def test_what_the_tools_leave_prepared_is_released_once_both_ended_and_also_after_a_failure():
    """`after` (the judge's release of tool runs prepared for this candidate) runs when both tools have ended,
    before the session times anything, whatever the tools did."""
    order = []

    def gate(out):
        time.sleep(0.05)
        order.append("memcheck")

    def evidence(out):
        order.append("ncu")
        return EXECUTED

    tools = ToolsBeforeTiming(gate, evidence, Stages(), overlap=True, after=lambda: order.append("released"))
    assert tools(object()) is None and order[-1] == "released" and sorted(order[:2]) == ["memcheck", "ncu"]

    def broken(out):
        raise InfraError("compute-sanitizer gave no verdict in 2 run(s)")

    order.clear()
    tools = ToolsBeforeTiming(broken, evidence, Stages(), overlap=True, after=lambda: order.append("released"))
    with pytest.raises(InfraError):
        tools(object())
    assert order == ["ncu", "released"]
