"""The session child started ahead (ptxcore.gpu.harness.waiting), on a CPU host with the real bubblewrap: the child
waits in its own sandbox with no candidate, the built library is handed in before LOAD and is what LOAD names, one
that cannot start or waited too long is never used, nothing is left running, and a running candidate cannot reach a
child that waits. A stand-in speaks the child's protocol (the real child needs a GPU to start: on this host it
fails, which the pool must survive); the meter's configuration beside the gate, with a fake meter."""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from ptxcore.gpu import gpu_available
from ptxcore.gpu.errors import InfraError
from ptxcore.gpu.harness import waiting as waiting_mod
from ptxcore.gpu.harness.calls import CallRecord, Tolerance
from ptxcore.gpu.harness.isolation import ChildProcess
from ptxcore.gpu.harness.meter import MeterError, choose_interval_ns
from ptxcore.gpu.harness.waiting import WaitingSession
from ptxcore.gpu.messages import ChildOp, SessionMode
from ptxcore.sandbox import find_bwrap
from tests.waiting import wait_for

try:
    find_bwrap()
except Exception:  # noqa: BLE001 - the sandbox's own tests say why
    pytest.skip("bubblewrap is not installed here", allow_module_level=True)

STAND_IN = r"""
import json, os, sys, time
args = sys.argv[1:]
cmd_fd, rep_fd = int(args[args.index('--cmd-fd') + 1]), int(args[args.index('--reply-fd') + 1])
rd, wr = os.fdopen(cmd_fd, 'rb'), os.fdopen(rep_fd, 'wb', buffering=0)
nonce = None
for line in rd:
    req = json.loads(line)
    op, seq, a = req['op'], req['seq'], req
    out = {'ok': True, 'seq': seq}
    if op == 'hello':
        nonce = a['nonce']
    elif op == 'load':
        lib = a['library']
        pids = sorted(int(p) for p in os.listdir('/proc') if p.isdigit())
        wrote = []
        for target in a.get('targets', []):
            try:
                open(target, 'w').write('forged'); wrote.append(target)
            except OSError:
                pass
        out.update(library=lib, text=open(lib).read(), pids=pids, wrote=wrote, uid=os.getuid())
    elif op == 'exit':
        wr.write((json.dumps({**out, 'nonce': nonce}) + '\n').encode()); break
    wr.write((json.dumps({**out, 'nonce': nonce}) + '\n').encode())
"""
PROGRAM = (sys.executable, "-c", STAND_IN)


def _stand_in(device: int) -> ChildProcess:
    return ChildProcess.start(device, SessionMode.FFI, None, program=PROGRAM)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def _load(child: ChildProcess, extra: dict | None = None) -> dict:
    reply = child.request(ChildOp.LOAD, child.load_args({"library": "unused", **(extra or {})}), "load", 30.0)
    assert reply.ok
    return reply.data


def test_the_waiting_child_takes_its_library_before_load_and_leaves_nothing(tmp_path):
    lib = tmp_path / "kernel.so"
    lib.write_text("the candidate's library")
    pool = WaitingSession(0, start=_stand_in)
    pool.fill()
    assert pool.waiting()
    pids = pool.pids()
    assert pids and all(_alive(p) for p in pids)
    child = pool.take(30.0)
    assert child is not None and not pool.waiting() and pool.pids() == set()
    child.hand_in(lib)
    seen = _load(child)
    assert seen["text"] == "the candidate's library" and seen["library"] == child.load_args({"library": "x"})["library"]
    assert seen["library"] != str(lib)  # a copy inside its own sandbox, not the judge's file
    with pytest.raises(InfraError, match="only a sandboxed child started without its candidate"):
        child.hand_in(lib)  # one candidate per child
    child.close()
    wait_for(lambda: not any(_alive(p) for p in pids), 15, "no process of the child left")


def test_a_child_that_cannot_start_is_not_used_and_the_session_starts_its_own():
    """The real session child on this host cannot start (no driver): the pool gives nothing and leaves nothing."""
    if gpu_available():
        pytest.skip("needs a host without a GPU")
    pool = WaitingSession(0)
    pool.fill()
    pids = pool.pids()
    assert pool.take(60.0) is None
    wait_for(lambda: not any(_alive(p) for p in pids), 15, "no process of the child left")
    pool.fill()
    assert pool.take(60.0) is None  # the start-up's failure found when taken: closed, nothing waits
    assert not pool.waiting()


def test_a_child_that_waited_too_long_or_died_is_replaced(monkeypatch):
    pool = WaitingSession(0, start=_stand_in)
    try:
        pool.fill()
        first = pool.pids()
        monkeypatch.setattr(waiting_mod, "MAX_AGE_S", 0.0)
        assert pool.take(30.0) is None  # too old: closed, not handed out
        wait_for(lambda: not any(_alive(p) for p in first), 15, "no process of the old child left")
        monkeypatch.setattr(waiting_mod, "MAX_AGE_S", 1200.0)
        pool.fill()
        second = pool._waiting
        assert second is not None
        second.child.kill()  # died while waiting
        pool.fill()  # replaced by a fresh one
        assert pool._waiting is not None and pool._waiting is not second and pool.waiting()
    finally:
        pool.close()
    assert not pool.waiting()


def test_a_disabled_pool_starts_nothing():
    pool = WaitingSession(0, enabled=False, start=lambda _d: pytest.fail("started a child"))
    pool.fill()
    assert pool.take(1.0) is None and pool.pids() == set()


def test_a_running_candidate_cannot_reach_the_child_that_waits(tmp_path):
    """A candidate in its session child (the stand-in playing it) sees none of the waiting child's processes and
    cannot write into its sandbox, even by its host path."""
    lib = tmp_path / "kernel.so"
    lib.write_text("x")
    pool = WaitingSession(0, start=_stand_in)
    running = ChildProcess.start(0, SessionMode.FFI, lib, program=PROGRAM)
    try:
        running.greet(30.0)
        pool.fill()
        waiting_box = pool._waiting.child.stage.box.scratch
        seen = _load(running, {"targets": [str(waiting_box / "kernel.so"), str(waiting_box / "x")]})
        assert seen["wrote"] == [] and not (waiting_box / "kernel.so").exists()
        assert not set(seen["pids"]) & pool.pids()
        assert len(seen["pids"]) <= 3  # its own PID namespace: the sandbox's init, itself, maybe a shell
        child = pool.take(30.0)
        child.hand_in(lib)
        assert _load(child)["text"] == "x"
        child.close()
    finally:
        running.close()
        pool.close()


# ---- the session's use of the pool, and the meter configured beside the gate -------------------------------

def _plan(candidate: Path | None, mode: SessionMode = SessionMode.FFI):
    from ptxcore.gpu.pipeline.session import SessionPlan

    return SessionPlan(mode=mode, load={"library": str(candidate)}, trials=3, warmup=10, iters=50, permute=False,
                       tol=Tolerance(1e-2, 1e-2, 1.0), call_timeout_s=30.0, startup_timeout_s=30.0,
                       throttle_retries=0, device=0, candidate=candidate)


def test_the_session_takes_the_waiting_child_for_a_built_library(tmp_path):
    from ptxcore.gpu.pipeline.session import CandidateSession

    lib = tmp_path / "kernel.so"
    lib.write_text("built")
    pool = WaitingSession(0, start=_stand_in)
    pool.fill()
    session = CandidateSession(_plan(lib), SimpleNamespace(), None, None, None, waiting=pool)
    child = session._child()
    try:
        assert session.out.child_waited and not pool.waiting()
        assert _load(child)["text"] == "built"
    finally:
        child.close()
        pool.close()


def test_a_library_that_cannot_be_handed_in_is_infra_and_leaves_nothing(tmp_path, monkeypatch):
    from ptxcore.gpu.harness.confine import StageSandbox
    from ptxcore.gpu.pipeline.session import CandidateSession

    def full_disk(self, library):
        raise OSError(28, "No space left on device")

    pool = WaitingSession(0, start=_stand_in)
    pool.fill()
    pids = pool.pids()
    monkeypatch.setattr(StageSandbox, "hand_in", full_disk)
    session = CandidateSession(_plan(tmp_path / "k.so"), SimpleNamespace(), None, None, None, waiting=pool)
    with pytest.raises(InfraError, match="cannot hand the built library to the session child: .*No space"):
        session._child()
    wait_for(lambda: not any(_alive(p) for p in pids), 15, "no process of the child left")
    assert not pool.waiting()


def test_a_triton_session_never_takes_the_waiting_child(tmp_path):
    from ptxcore.gpu.pipeline.session import CandidateSession

    pool = WaitingSession(0, start=_stand_in)
    pool.fill()
    session = CandidateSession(_plan(None, SessionMode.TRITON), SimpleNamespace(), None, None, None, waiting=pool)
    try:
        with pytest.raises(Exception):  # noqa: B017 - a fresh child of its own (which cannot start here)
            session._child()
        assert pool.waiting() and not session.out.child_waited
    finally:
        pool.close()


class _Meter:
    description = "fake"

    def __init__(self, fail: int = 0) -> None:
        self.fail, self.intervals, self.threads = fail, [], []
        self.configured = threading.Event()

    def configure(self, interval_ns: int) -> None:
        self.threads.append(threading.current_thread().name)
        if self.fail:
            self.fail -= 1
            raise MeterError("refused")
        self.intervals.append(interval_ns)
        self.configured.set()


def _with_windows(session, windows_ns: list[int]) -> None:
    for i, w in enumerate(windows_ns):
        rec = CallRecord(i, "correctness", i, 0)
        rec.window = SimpleNamespace(window_ns=w)
        session.out.correctness.append(rec)


def test_the_meter_is_configured_beside_the_gate_as_timing_would_configure_it(tmp_path):
    from ptxcore.gpu.pipeline.session import CandidateSession

    meter = _Meter()
    session = CandidateSession(_plan(tmp_path / "k.so"), SimpleNamespace(), None, None, meter)
    _with_windows(session, [3_000_000, 1_000_000, 2_000_000])

    def gate():  # returns only once the meter was configured: the two ran at once
        assert meter.configured.wait(10)
        return None

    assert session._gate_beside_configure(gate) is None
    assert meter.intervals == [choose_interval_ns(2_000_000, 60, per_call=25)] and meter.threads == ["meter-configure"]
    assert session._configured and "meter_configure" in session.out.stage_seconds


def test_a_gate_verdict_stands_and_a_failed_configuration_is_made_again_before_timing(tmp_path):
    from ptxcore.gpu.pipeline.session import CandidateSession
    from ptxcore.gpu.pipeline.verdicts import Verdict
    from ptxcore.schema import EvaluationStatus

    meter = _Meter(fail=1)
    session = CandidateSession(_plan(tmp_path / "k.so"), SimpleNamespace(), None, None, meter)
    _with_windows(session, [1_000_000])
    assert session._gate_beside_configure(lambda: None) is None
    assert not session._configured and meter.intervals == []  # refused beside the gate
    session._configure_meter()  # what _timing does when nothing was configured
    assert session._configured and meter.intervals == [choose_interval_ns(1_000_000, 60, per_call=25)]
    failed = Verdict(EvaluationStatus.RUNTIME_ERROR, "memcheck found 2 memory error(s)")
    again = CandidateSession(_plan(tmp_path / "k.so"), SimpleNamespace(), None, None, _Meter(fail=1))
    assert again._gate_beside_configure(lambda: failed) is failed


def test_no_meter_means_the_gate_alone(tmp_path):
    from ptxcore.gpu.pipeline.session import CandidateSession

    session = CandidateSession(_plan(tmp_path / "k.so"), SimpleNamespace(), None, None, None)
    names: list[str] = []
    assert session._gate_beside_configure(lambda: names.append(threading.current_thread().name)) is None
    assert names == [threading.main_thread().name] and not session._configured


def test_the_stand_in_speaks_the_protocol_the_judge_expects(tmp_path):
    """The stand-in is only useful if the judge's own channel accepts it: a nonce-checked reply per request."""
    child = ChildProcess.start(0, SessionMode.FFI, None, program=PROGRAM)
    try:
        t0 = time.monotonic()
        child.greet(30.0)
        assert time.monotonic() - t0 < 30
        reply = child.request(ChildOp.EXIT, None, "exit", 10.0)
        assert reply.ok and json.dumps(reply.data) == "{}"
    finally:
        child.close()


# ---- no waiting child beside a baseline's or a Triton candidate's timing ---------------------------------------

def test_the_waiting_child_is_closed_before_a_baseline_is_timed_and_only_then(tmp_path, monkeypatch):
    from ptxcore.gpu.pipeline import reference as reference_mod
    from ptxcore.gpu.pipeline.caches import JsonCache
    from ptxcore.gpu.pipeline.session import SessionOutcome

    order: list[str] = []

    class FakeSession:
        def __init__(self, *args, **kwargs) -> None:
            pass

        def run(self, gate=None) -> SessionOutcome:
            order.append("timed")
            return SessionOutcome(latency_ms=0.75, trials=[SimpleNamespace(median_ms=0.75, throttle_reasons=[])])

    monkeypatch.setattr(reference_mod, "CandidateSession", FakeSession)
    state = SimpleNamespace(problem=SimpleNamespace(name="gemm_n7168_k5120"), spec=SimpleNamespace(workload_uuid="w0"))
    cache = JsonCache(tmp_path / "reference")
    plan = _plan(None, SessionMode.BASELINE)
    args = (state, plan, cache, "NVIDIA H200", "580", None, None, None)
    first = reference_mod.reference_latency(*args, before_timing=lambda: order.append("closed"))
    again = reference_mod.reference_latency(*args, before_timing=lambda: order.append("closed"))
    assert order == ["closed", "timed"]  # a cached reference times nothing, so nothing is closed
    assert not first.cached and again.cached and again.latency_ms == 0.75


def test_a_triton_judgement_closes_the_waiting_child_first(tmp_path, monkeypatch):
    from ptxcore.arch import get_architecture
    from ptxcore.gpu.config import JudgeConfig
    from ptxcore.gpu.pipeline import judge as judge_mod
    from ptxcore.gpu.pipeline.judge import GpuJudge
    from ptxcore.problems import get_problem

    judge = GpuJudge(JudgeConfig(cache_dir=tmp_path))
    judge.waiting = WaitingSession(0, start=_stand_in)
    judge.waiting.fill()
    pids = judge.waiting.pids()
    seen: list[bool] = []

    def built(*args, **kwargs):
        seen.append(judge.waiting.waiting())
        raise RuntimeError("stop here")

    monkeypatch.setattr(judge_mod, "gpu_available", lambda: True)
    monkeypatch.setattr(judge, "_built", built)
    with pytest.raises(RuntimeError, match="stop here"):
        judge.judge("import triton", get_problem("gemm_n7168_k5120"), get_architecture("hopper"), language="triton")
    assert seen == [False]
    wait_for(lambda: not any(_alive(p) for p in pids), 15, "no process of the child left")
    judge.close()
