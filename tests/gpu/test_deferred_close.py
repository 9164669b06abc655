"""A session's close after its verdict (ptxcore.gpu.pipeline.cleanup, JudgeConfig.defer_session_close, issue 27):
one close at a time on its own thread, waited for before the judge's next GPU work, a failed close failing that
work once; the session hands its close over instead of running it, and runs it itself when not deferred."""

from __future__ import annotations

import dataclasses
import threading
import time
from types import SimpleNamespace

import pytest

from ptxcore.gpu.errors import InfraError
from ptxcore.gpu.harness.calls import Tolerance
from ptxcore.gpu.messages import SessionMode
from ptxcore.gpu.pipeline.cleanup import DeferredClose
from ptxcore.gpu.pipeline.session import CandidateSession, SessionPlan
from ptxcore.gpu.pipeline.verdicts import Verdict
from ptxcore.schema import EvaluationStatus


def test_a_close_runs_on_its_own_thread_and_the_wait_ends_with_it():
    closing, started, release = DeferredClose(), threading.Event(), threading.Event()
    ran: list[str] = []

    def close():
        started.set()
        release.wait(10)
        ran.append(threading.current_thread().name)

    closing.submit(close)
    assert started.wait(10) and closing.pending() and ran == []  # the caller went on
    threading.Timer(0.2, release.set).start()
    assert closing.wait() >= 0.1 and ran == ["session-close"] and not closing.pending()
    assert closing.wait() == pytest.approx(0.0, abs=0.05)  # nothing left to wait for


def test_closes_never_overlap():
    closing, running, overlaps = DeferredClose(), [], []

    def close():
        running.append(1)
        overlaps.append(len(running))
        time.sleep(0.05)
        running.pop()

    for _ in range(3):
        closing.submit(close)
    closing.wait()
    assert overlaps == [1, 1, 1]


def test_a_failed_close_fails_the_next_gpu_work_once():
    closing = DeferredClose()

    def close():
        raise OSError("the child's sandbox could not be removed")

    closing.submit(close)
    with pytest.raises(InfraError, match="previous session's close failed: OSError: the child's sandbox"):
        closing.wait()
    assert closing.wait() == pytest.approx(0.0, abs=0.05)


class _Child:
    def __init__(self) -> None:
        self.closed_on: list[str] = []

    def close(self) -> None:
        self.closed_on.append(threading.current_thread().name)


class _Meter:
    description = "fake"

    def __init__(self) -> None:
        self.closed = 0

    def open(self) -> None:
        pass

    def close(self) -> None:
        self.closed += 1


def _session(monkeypatch, defer):
    plan = SessionPlan(mode=SessionMode.FFI, load={"library": "/k.so"}, trials=0, warmup=10, iters=50, permute=False,
                       tol=Tolerance(1e-2, 1e-2, 1.0), call_timeout_s=30.0, startup_timeout_s=30.0,
                       throttle_retries=0, device=0)
    child, meter = _Child(), _Meter()
    session = CandidateSession(dataclasses.replace(plan), SimpleNamespace(spec=None), None, None, meter,
                               defer_close=defer)
    verdict = Verdict(EvaluationStatus.INCORRECT_NUMERICAL, "3 of 9 elements mismatched")
    monkeypatch.setattr(session, "_child", lambda: child)
    monkeypatch.setattr(session, "_drive", lambda *a: verdict)
    return session, child, meter, verdict


def test_the_session_hands_its_close_over_and_its_verdict_is_the_same(monkeypatch):
    closing = DeferredClose()
    session, child, meter, verdict = _session(monkeypatch, closing.submit)
    out = session.run()
    closing.wait()
    assert out.verdict is verdict and child.closed_on == ["session-close"] and meter.closed == 1
    assert "child_close" not in out.stage_seconds  # measured on the thread, after the verdict went
    assert out.stage_seconds["session_close"] < 0.5


def test_without_deferral_the_session_closes_before_it_returns(monkeypatch):
    session, child, meter, verdict = _session(monkeypatch, None)
    out = session.run()
    assert out.verdict is verdict and child.closed_on == [threading.current_thread().name] and meter.closed == 1
    assert {"child_close", "meter_close", "slots_release", "session_close"} <= set(out.stage_seconds)


def test_the_judge_hands_an_ffi_sessions_close_over_and_the_next_judgement_waits_for_it(monkeypatch, tmp_path):
    """GpuJudge wiring with fakes for the GPU, the build, the workload and the session: with both issue-27 options
    on, the tool runs are prepared after the workload and released when the judgement ends; the session gets the
    judge's deferred close; the next judgement waits for that close before its GPU work (stage close_wait)."""
    import ptxcore.gpu.child.driver as driver
    from ptxcore.gpu import JudgeConfig
    from ptxcore.gpu.pipeline import judge as judge_module
    from ptxcore.gpu.pipeline.result import ResultBuilder
    from ptxcore.gpu.pipeline.session import SessionOutcome
    from ptxcore.problems import get_problem
    from ptxcore.schema import TargetInstruction, TargetInstructionEvidence

    order: list[str] = []

    class FakeSession:
        def __init__(self, plan, state, flusher, monitor, meter=None, waiting=None, defer_close=None) -> None:
            assert defer_close is not None and plan.mode is SessionMode.FFI
            self.defer_close = defer_close
            self.out = SessionOutcome(verdict=Verdict(EvaluationStatus.RUNTIME_ERROR, "candidate process exited 1"))

        def run(self, gate=None) -> SessionOutcome:
            order.append("session")

            def close() -> None:
                time.sleep(0.3)
                order.append("closed")

            self.defer_close(close)
            return self.out

    problem = get_problem("gemm_n7168_k5120")
    compiled = SimpleNamespace(artifact=tmp_path / "k.so")
    monkeypatch.setattr(judge_module, "gpu_available", lambda: True)
    monkeypatch.setattr(judge_module, "CandidateSession", FakeSession)
    monkeypatch.setattr(judge_module, "needed_libraries", lambda path: [])
    monkeypatch.setattr(driver, "reset_persisting_l2", lambda: None)
    j = judge_module.GpuJudge(JudgeConfig(cache_dir=tmp_path / "judge", prepare_tools=True, defer_session_close=True))
    j._gpu = judge_module.GpuContext({"gpu_name": "H200 (fake)", "driver_version": "0", "cuda_toolkit": "13",
                                      "torch_version": "x"}, None, None, (9, 0))
    monkeypatch.setattr(j, "_built", lambda *a, **k: (ResultBuilder(problem.name, problem.workload(None).uuid,
                                                                    "hopper"), compiled, None))
    monkeypatch.setattr(j, "_prestart", lambda: None)
    monkeypatch.setattr(j, "_workload", lambda problem, gpu, r: (order.append("workload") or "state",
                                                                 SimpleNamespace(latency_ms=1.0, call_overhead_ms=0.0)))
    monkeypatch.setattr(j.tools, "prepare_ahead", lambda p, w: order.append("ahead") or [])
    monkeypatch.setattr(j.tools, "prepare", lambda c, p, w: order.append("prepare") or [])
    monkeypatch.setattr(j.tools, "release_prepared", lambda: order.append("release"))
    monkeypatch.setattr(j.tools, "static_only", lambda c, why: TargetInstructionEvidence(
        status=TargetInstruction.UNKNOWN, reason=why))
    first = j.judge("src", problem, HOPPER_ARCH())
    assert first.status is EvaluationStatus.RUNTIME_ERROR
    assert order == ["ahead", "workload", "prepare", "session", "release"]  # the verdict before the close ended
    second = j.judge("src", problem, HOPPER_ARCH())
    assert order[5:] == ["ahead", "closed", "workload", "prepare", "session", "release"]  # prepared as it builds
    assert second.stage_seconds["close_wait"] >= 0.1
    j.close()
    assert order[-2:] == ["closed", "release"] and not j._closing.pending()  # the close waited for, then the rest


def HOPPER_ARCH():  # noqa: N802 - read like the constant it stands for
    from ptxcore.arch import get_architecture

    return get_architecture("hopper")


def test_a_reference_timed_in_a_judgement_ends_the_runs_prepared_for_it_first(monkeypatch, tmp_path):
    """Tool runs are prepared before the build, so a judgement that then times its problem's baseline (the first of
    a workload) must end them, like the waiting child, before that timing."""
    from ptxcore.gpu import JudgeConfig
    from ptxcore.gpu.pipeline import judge as judge_module
    from ptxcore.gpu.pipeline import reference as reference_module

    ended: list[str] = []
    j = judge_module.GpuJudge(JudgeConfig(cache_dir=tmp_path / "judge", prepare_tools=True))
    monkeypatch.setattr(j.waiting, "close", lambda: ended.append("waiting child"))
    monkeypatch.setattr(j.tools, "release_prepared", lambda: ended.append("prepared runs"))

    def timed(state, plan, cache, gpu_name, driver, flusher, monitor, meter=None, before_timing=None):
        before_timing()
        ended.append("baseline timed")
        return "timing"

    monkeypatch.setattr(reference_module, "reference_latency", timed)
    gpu = judge_module.GpuContext({"gpu_name": "H200 (fake)", "driver_version": "0"}, None, None, (9, 0))
    from ptxcore.problems import get_problem

    assert j._reference(SimpleNamespace(), get_problem("gemm_n7168_k5120"), gpu) == "timing"
    assert ended == ["waiting child", "prepared runs", "baseline timed"]
