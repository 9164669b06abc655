"""The Triton wiring of the GPU rooms, without a GPU: the child's mode triton (arguments, load/call/launches,
fault replies), the standalone variant, the judge's workspace and tool commands, the session's Triton rules
and the GPU host's second validation. Fakes stand in for Triton, CUPTI and the driver."""

from __future__ import annotations

import os
import stat
import sys
import threading
from pathlib import Path
from types import SimpleNamespace
from typing import TYPE_CHECKING

import pytest

from ptxcore.arch import get_architecture
from ptxcore.gpu.child import main as child_main
from ptxcore.gpu.child import session as child_session
from ptxcore.gpu.child.cupti import ActivityRecord
from ptxcore.gpu.harness.calls import HOST_STAGES, CallDriver, CallFailed, CallRecord
from ptxcore.gpu.harness.triton import TritonFiles, candidate_args
from ptxcore.gpu.messages import (
    Channel,
    ChildOp,
    ChildReply,
    ChildRequest,
    SessionMode,
    TimingRow,
    TimingsReply,
)
from ptxcore.schema import EvaluationStatus
from ptxcore.triton.loader import CandidateFault, CandidateLoadError
from ptxcore.triton.session import CandidateCallError

if TYPE_CHECKING:
    from collections.abc import Callable

    from ptxcore.arch import Architecture
    from ptxcore.gpu.harness.l2 import L2Flusher
    from ptxcore.gpu.harness.meter import DeviceMeter
    from ptxcore.gpu.harness.monitor import GpuMonitor
    from ptxcore.gpu.harness.state import WorkloadState
    from ptxcore.gpu.harness.waiting import WaitingSession
    from ptxcore.gpu.pipeline.result import ResultBuilder
    from ptxcore.gpu.pipeline.session import SessionOutcome, SessionPlan
    from ptxcore.gpu.pipeline.tools import ToolStages
    from ptxcore.gpu.pipeline.verdicts import Verdict
    from ptxcore.problems import Problem
    from ptxcore.schema import TargetInstructionEvidence

GEMM = "gemm_n7168_k5120"
HOPPER = get_architecture("hopper")
CONTROLS = Path(__file__).resolve().parents[1] / "fixtures" / "controls" / "triton"
COMPILE_FAULT = CandidateFault("COMPILE_ERROR", "Triton compilation failed: CompilationError: arange's range must "
                                                "be a power of 2\n  kernel.py:9 in gemm_nt_bad: rows = ...")


# ---- the child's command line -----------------------------------------------------------------------------

@pytest.mark.parametrize("argv", [
    ["sanitize", "--problem", GEMM],                                              # no candidate
    ["profile", "--library", "k.so", "--triton-source", "k.py", "--triton-cache", "c", "--problem", GEMM],
    ["profile", "--triton-source", "k.py", "--problem", GEMM],                    # no cache
    ["session", "--cmd-fd", "3", "--reply-fd", "4", "--session-mode", "python"],
])
def test_bad_child_arguments_are_refused(argv, capsys):
    with pytest.raises(SystemExit) as info:
        child_main.main(argv)
    assert info.value.code == 2


def test_child_modes_route_triton_arguments(monkeypatch):
    import ptxcore.gpu.child.standalone as standalone

    seen = {}
    monkeypatch.setattr(standalone, "run_standalone",
                        lambda args, profile, prepared=None: seen.update(args=args, profile=profile, prepared=prepared) or 0)
    monkeypatch.setattr(child_session, "run_session", lambda r, w, d, mode: seen.update(mode=mode) or 0)
    assert child_main.main(["profile", "--triton-source", "k.py", "--triton-cache", "c", "--problem", GEMM]) == 0
    assert seen["profile"] and seen["args"].triton_source == "k.py" and seen["args"].library is None
    assert seen["prepared"] is None  # a run started with its candidate prepares nothing ahead
    assert child_main.main(["session", "--cmd-fd", "3", "--reply-fd", "4", "--session-mode", "triton"]) == 0
    assert seen["mode"] == "triton"


def test_the_standalone_triton_variant_calls_through_the_triton_session(monkeypatch):
    import ptxcore.triton.session as triton_session
    from ptxcore.gpu.child.standalone import _candidate

    calls = []

    class FakeSession:
        def __init__(self, source: Path, cache: Path) -> None:
            calls.append(("load", source, cache))

        def call(self, args: list) -> None:
            calls.append(("call", args))

    monkeypatch.setattr(triton_session, "TritonSession", FakeSession)
    monkeypatch.setitem(sys.modules, "tvm_ffi", None)  # the Triton variant never needs TVM-FFI
    fn, stream = _candidate(SimpleNamespace(triton_source="/w/kernel.py", triton_cache="/w/triton-cache", library=None))
    with stream:
        fn("A", "B", "C")
    assert calls == [("load", Path("/w/kernel.py"), Path("/w/triton-cache")), ("call", ["A", "B", "C"])]


# ---- the session child in mode triton ---------------------------------------------------------------------

class FakeRecorder:
    def __init__(self, records: list[ActivityRecord]) -> None:
        self.t, self.records = 0, records

    def now_ns(self) -> int:
        self.t += 1000
        return self.t

    def drain(self) -> list[ActivityRecord]:
        out, self.records = self.records, []
        return out


class FakeCandidate:
    def __init__(self, source: str, cache: str, device: int) -> None:
        self.loaded, self.calls = (source, cache, device), []

    def __call__(self, args: list) -> None:
        self.calls.append(list(args))

    def launches(self) -> dict:
        return {"kernels": ["gemm"], "steady": [], "per_call": [["gemm"]]}


def _bare_session(monkeypatch, records: list[ActivityRecord]) -> child_session.Session:
    import ptxcore.gpu.child.triton_mode as triton_mode

    monkeypatch.setattr(triton_mode, "TritonCandidate", FakeCandidate)
    monkeypatch.setattr(child_session.driver, "synchronize", lambda: None)
    monkeypatch.setattr(child_session.driver, "clear_persisting_l2", lambda: False)
    s = object.__new__(child_session.Session)
    s.device, s.recorder, s.windows, s.records, s.fn, s.slots = 1, FakeRecorder(records), [], [], None, {}
    s.mode = SessionMode.TRITON
    return s


def test_mode_triton_loads_calls_and_reports_launches_and_kernel_names(monkeypatch):
    records = [ActivityRecord("kernel", "gemm", 1500, 1600, 7), ActivityRecord("kernel", "gemm", 1610, 1700, 7),
               ActivityRecord("kernel", "_ZN2at6native_fill", 1710, 1800, 7)]
    s = _bare_session(monkeypatch, records)
    s.load({"source": "/w/kernel.py", "triton_cache": "/w/triton-cache"})
    assert s.fn.loaded == ("/w/kernel.py", "/w/triton-cache", 1)
    s.slots[0] = child_session.Slot([], ["A", "B", "C"], [], ["C"], [])
    assert "wall_ns" in s.call({"slot": 0, "tag": 0})
    assert s.fn.calls == [["A", "B", "C"]]
    assert s.launches({})["kernels"] == ["gemm"]
    reply = TimingsReply.from_data(s.timings({}))
    names = ("_ZN2at6native_fill", "gemm")
    assert reply.calls == (TimingRow(0, 300, 3, 3, names, names, 280),)  # 100 + 90 + 90 ns covered


def test_only_mode_triton_has_a_launch_report_and_kernel_names(monkeypatch):
    s = _bare_session(monkeypatch, [ActivityRecord("kernel", "k", 1500, 1600, 7)])
    s.mode = SessionMode.FFI
    s.windows.append(child_session.CallWindow(0, 1000, 2000))
    with pytest.raises(RuntimeError, match="mode triton"):
        s.launches({})
    assert TimingsReply.from_data(s.timings({})).calls == (TimingRow(0, 100, 1, 1, ("k",), ("k",), 100),)


def test_a_classified_triton_fault_keeps_its_status_and_trimmed_message(capsys):
    error, data = child_session._failure(CandidateCallError(COMPILE_FAULT), SessionMode.TRITON)
    assert data == {"fault": "COMPILE_ERROR"} and error == COMPILE_FAULT.message
    assert "Traceback" not in capsys.readouterr().err
    error, data = child_session._failure(CandidateCallError(COMPILE_FAULT), SessionMode.FFI)
    assert data == {} and error.startswith("CandidateCallError: ")  # a CUDA child never reports a fault status
    error, data = child_session._failure(ValueError("boom"), SessionMode.TRITON)
    assert data == {} and error == "ValueError: boom"


def test_run_session_in_mode_triton_replies_with_the_fault(monkeypatch):
    class FakeSession:
        def __init__(self, device: int, mode: SessionMode) -> None:
            assert mode is SessionMode.TRITON

        def load(self, msg: dict) -> dict:
            return {}

        def call(self, msg: dict) -> dict:
            raise CandidateCallError(COMPILE_FAULT)

    monkeypatch.setattr(child_session, "Session", FakeSession)
    cmd_r, cmd_w = os.pipe()
    rep_r, rep_w = os.pipe()
    judge = Channel(rep_r, cmd_w)
    out = {}
    thread = threading.Thread(target=lambda: out.update(rc=child_session.run_session(cmd_r, rep_w, 0,
                                                                                    SessionMode.TRITON)))
    thread.start()
    replies = []
    for seq, (op, args) in enumerate([(ChildOp.HELLO, {"nonce": "n0"}), (ChildOp.LOAD, {}),
                                      (ChildOp.CALL, {"slot": 0, "tag": 0})], start=1):
        judge.send(ChildRequest(op, seq, args).to_wire())
        replies.append(ChildReply.from_wire(judge.recv(10.0), seq, "n0"))
    thread.join(10)
    assert out["rc"] == 3 and replies[0].ok and replies[1].ok
    failed = replies[2]
    assert not failed.ok and failed.fault == "COMPILE_ERROR" and failed.error == COMPILE_FAULT.message
    assert sys.modules.get("torch", "absent") is not None  # mode triton blocks no import
    for fd in (cmd_r, cmd_w, rep_r, rep_w):
        try:
            os.close(fd)
        except OSError:
            pass


# ---- the judge's side ----------------------------------------------------------------------------------------

def test_the_workspace_holds_a_read_only_kernel_and_a_private_cache(tmp_path):
    with TritonFiles.create("import triton\n", parent=tmp_path) as files:
        assert files.source.read_text() == "import triton\n" and files.cache.is_dir()
        assert not files.source.stat().st_mode & (stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH)
        assert stat.S_IMODE(files.root.stat().st_mode) == 0o700
        assert files.load_message() == {"source": str(files.source), "triton_cache": str(files.cache)}
        assert candidate_args(files) == ["--triton-source", str(files.source), "--triton-cache", str(files.cache)]
    assert not files.root.exists()
    assert candidate_args(Path("/b/kernel.so")) == ["--library", "/b/kernel.so"]


@pytest.fixture
def tools_on_path(monkeypatch, tmp_path) -> Path:
    bindir = tmp_path / "bin"  # its own install folder (the stage mounts it read-only), readable by everyone as a
    bindir.mkdir(mode=0o755)  # tool's is: where the judge is root, the stage runs it as nobody
    tool = bindir / "tool"
    tool.write_text("#!/bin/sh\nexit 0\n")
    tool.chmod(0o755)
    monkeypatch.setenv("PTXBENCH_NCU", str(tool))
    monkeypatch.setenv("PTXBENCH_COMPUTE-SANITIZER", str(tool))
    return tool


def test_the_cuda_tool_commands_are_unchanged(tools_on_path):
    from ptxcore.gpu.harness.ncu import ncu_command
    from ptxcore.gpu.harness.sanitizer import memcheck_command

    t, py = str(tools_on_path), sys.executable
    assert memcheck_command(Path("/b/k.so"), GEMM, "w", 7, 0, 1) == [
        t, "--tool", "memcheck", "--error-exitcode", "86", "--print-limit", "20", "--show-backtrace", "device",
        py, "-m", "ptxcore.gpu.child", "sanitize", "--library", "/b/k.so", "--problem", GEMM, "--workload", "w",
        "--seed", "7", "--device", "0", "--calls", "1"]
    assert ncu_command(Path("/b/k.so"), GEMM, "w", 7, 0, calls=2) == [
        t, "--replay-mode", "application", "--clock-control", "none", "--page", "source", "--print-source", "sass",
        "--print-kernel-base", "mangled", "--metrics", "inst_executed,thread_inst_executed_true", "--nvtx", "--nvtx-include", "ptxbench_call/",
        "--nvtx-include", "ptxbench_call]", py, "-m", "ptxcore.gpu.child", "profile", "--library", "/b/k.so",
        "--problem", GEMM, "--workload", "w", "--seed", "7", "--device", "0", "--calls", "2"]


def test_triton_tool_runs_get_the_files_and_ncu_the_kernel_filter(tools_on_path, tmp_path, monkeypatch):
    from ptxcore.gpu.harness import ncu
    from ptxcore.gpu.harness.sanitizer import memcheck_command
    from ptxcore.schema import TargetInstruction

    files = TritonFiles.create("import triton\n", parent=tmp_path)
    cmd = memcheck_command(files, GEMM, "w", 7, 0, 1)
    assert "--library" not in cmd and cmd[cmd.index("--triton-source") + 1] == str(files.source)
    tools_on_path.write_text('#!/bin/sh\necho "host $(hostname) args $*"; cat "$(echo "$*" | sed \'s/.*--triton-source //; s/ .*//\')"\n')
    monkeypatch.setattr(ncu, "ncu_version", lambda: "ncu test")
    raw = tmp_path / "ncu.txt"
    ev = ncu.profile_target(files, GEMM, "w", 7, 0, HOPPER, 60.0, raw_log=raw, kernel_names=["gemm_b", "gemm_a"])
    text = raw.read_text()
    assert "host sandbox args --kernel-name regex:^(gemm_a|gemm_b)$ " in text  # it ran in the sandbox
    assert f"--triton-cache {files.cache} " in text and "import triton" in text  # and saw the candidate's files
    assert ev.status is TargetInstruction.UNKNOWN  # ncu printed nothing useful: never a guess
    files.remove()


class FakeChild:
    def __init__(self, replies: list[ChildReply]) -> None:
        self.replies, self.timeouts = list(replies), []

    def request(self, op: ChildOp, args: dict | None, what: str, timeout_s: float) -> ChildReply:
        self.timeouts.append(timeout_s)
        return self.replies.pop(0)

    def mapped_libraries(self) -> list[str]:
        raise AssertionError("mode triton never reads the mapped libraries (torch maps cuBLAS anyway)")


def _driver(child: FakeChild, first: float | None, monkeypatch) -> CallDriver:
    import torch

    monkeypatch.setattr(torch.cuda, "synchronize", lambda: None)
    d = object.__new__(CallDriver)
    noop = SimpleNamespace(load_inputs=lambda *a: None, poison_outputs=lambda: None, flush=lambda: None)
    d.child, d.slots, d.flusher, d.call_timeout_s, d.first_call_timeout_s = child, [noop], noop, 30.0, first
    d.state = SimpleNamespace(spec=SimpleNamespace(outputs=[]), trials=[SimpleNamespace(inputs={})])
    d.records, d._last_perm, d._keep, d.l2_resets = [], {}, [], 0
    d.meter, d.clock, d._open_gap, d.trials = None, iter(range(0, 10**9, 1000)).__next__, None, []
    d.new_event = lambda: SimpleNamespace(elapsed_time=lambda other: 0.0)
    d.host_s = dict.fromkeys(HOST_STAGES, 0.0)
    return d


def test_the_first_call_gets_the_startup_deadline_and_a_fault_comes_back(monkeypatch):
    ok = ChildReply(True, 1, "n", {"wall_ns": 5})
    bad = ChildReply(False, 3, "n", {"fault": "COMPILE_ERROR"}, stage="call", error=COMPILE_FAULT.message)
    child = FakeChild([ok, ok, bad])
    d = _driver(child, 120.0, monkeypatch)
    d.call("correctness", 0, 0)
    d.call("correctness", 0, 0)
    with pytest.raises(CallFailed) as info:
        d.call("correctness", 0, 0)
    assert child.timeouts == [120.0, 30.0, 30.0]
    assert info.value.fault == "COMPILE_ERROR" and info.value.error == COMPILE_FAULT.message
    cuda = FakeChild([ok])
    _driver(cuda, None, monkeypatch).call("correctness", 0, 0)
    assert cuda.timeouts == [30.0]  # a CUDA session's first call has the per-call deadline, as before


def _session(mode: SessionMode):
    from ptxcore.gpu.harness.calls import Tolerance
    from ptxcore.gpu.pipeline.session import CandidateSession, SessionPlan

    plan = SessionPlan(mode=mode, load={}, trials=3, warmup=1, iters=3, permute=True,
                       tol=Tolerance(1e-2, 1e-2, 1.0), call_timeout_s=30.0, startup_timeout_s=120.0,
                       throttle_retries=0, device=0)
    return CandidateSession(plan, SimpleNamespace(), None, None)


def test_a_triton_compile_fault_is_a_compile_error_only_in_mode_triton():
    failed = CallFailed(CallRecord(0, "correctness", 0, 0), COMPILE_FAULT.message, "COMPILE_ERROR")
    v = _session(SessionMode.TRITON)._failed(failed)
    assert v.status is EvaluationStatus.COMPILE_ERROR and v.reason == COMPILE_FAULT.message
    assert _session(SessionMode.FFI)._failed(failed).status is EvaluationStatus.RUNTIME_ERROR
    runtime = CallFailed(CallRecord(0, "correctness", 0, 0), "error during call: IndexError", "RUNTIME_ERROR")
    v = _session(SessionMode.TRITON)._failed(runtime)
    assert v.status is EvaluationStatus.RUNTIME_ERROR and "correctness call 0 of trial 0" in v.reason
    load = CallFailed(CallRecord(None, "load", 0, None), "error during import: NameError", "RUNTIME_ERROR")
    assert "loading the module" in _session(SessionMode.TRITON)._failed(load).reason


def test_mode_triton_applies_the_foreign_kernel_rule_with_the_launch_report():
    from ptxcore.gpu.child.cupti import CallTiming
    from ptxcore.gpu.pipeline.session import _launch_report

    session = _session(SessionMode.TRITON)
    report = ChildReply(True, 1, "n", {"kernels": ["gemm", 7, None], "steady": [{"name": "gemm"}, "x"], "per_call": 3})
    session.out.launches = _launch_report(FakeChild([report]), 30.0)
    assert session.out.launches == {"kernels": ["gemm"], "steady": [{"name": "gemm"}], "per_call": []}
    rec = CallRecord(1, "correctness", 1, 0)
    rec.timing = CallTiming(1, 100, 2, 2, (), ("gemm", "_ZN2at6native_mul"))
    v = session._rules(FakeChild([]), [rec])
    assert v.status is EvaluationStatus.REJECTED and "_ZN2at6native_mul" in v.reason
    rec.timing = CallTiming(1, 100, 1, 1, (), ("gemm",))
    assert session._rules(FakeChild([]), [rec]) is None


def test_the_gpu_host_validates_again_whatever_the_cpu_stage_said(tmp_path):
    from ptxcore.compile import CompiledCandidate
    from ptxcore.gpu import JudgeConfig
    from ptxcore.gpu.pipeline.judge import GpuJudge
    from ptxcore.schema import CompileResult, CompileStatus, text_sha256

    hostile = (CONTROLS / "02_torch_fallback_getattr.py").read_text()
    forged = CompiledCandidate(CompileResult(status=CompileStatus.COMPILED, source_sha256=text_sha256(hostile),
                                             arch="hopper", flags=["triton"]), None, None)
    built = GpuJudge(JudgeConfig(cache_dir=tmp_path)).build(hostile, HOPPER, forged, language="triton")
    assert built.result.status is CompileStatus.REJECTED and "[reflection]" in built.result.reason


def test_judging_triton_without_a_gpu_raises_no_gpu(tmp_path, monkeypatch):
    from ptxcore.gpu import JudgeConfig, NoGPUError, judge_candidate
    from ptxcore.problems import get_problem

    monkeypatch.setenv("PTXBENCH_FORCE_NO_GPU", "1")
    with pytest.raises(NoGPUError):
        judge_candidate((CONTROLS / "01_gemm_mma_sync.py").read_text(), get_problem(GEMM), HOPPER,
                        JudgeConfig(cache_dir=tmp_path), language="triton")


def test_candidate_load_errors_are_classified_for_the_reply():
    error, data = child_session._failure(CandidateLoadError(CandidateFault("RUNTIME_ERROR", "error during import: "
                                                                           "NameError: x")),
                                         SessionMode.TRITON)
    assert data == {"fault": "RUNTIME_ERROR"} and error.startswith("error during import")


# ---- GpuJudge's Triton sequence with its GPU parts faked ------------------------------------------------------

SOLUTION = (Path(__file__).resolve().parents[2] / "solutions" / "triton" / "gemm_n7168_k5120"
            / "tma_persistent.py").read_text()


@pytest.fixture
def fake_gpu_judge(monkeypatch, tmp_path):
    """A GpuJudge whose GPU, workload, reference, session and tool stages are fakes; `seen` records the calls."""
    import ptxcore.gpu.child.driver as driver
    from ptxcore.gpu import JudgeConfig
    from ptxcore.gpu.harness.compare import CompareStats
    from ptxcore.gpu.pipeline import judge as judge_module
    from ptxcore.gpu.pipeline.session import SessionOutcome
    from ptxcore.schema import ProfiledKernel, TargetInstruction, TargetInstructionEvidence

    checked = CallRecord(0, "correctness", 0, 0)
    checked.stats = CompareStats(100, 0, 0, 0, 0, 0.001, 0.002)
    seen: dict = {"outcome": SessionOutcome(latency_ms=2.0, correctness=[checked])}

    class FakeSession:
        def __init__(self, plan: SessionPlan, state: WorkloadState, flusher: L2Flusher, monitor: GpuMonitor,
                     meter: DeviceMeter | None = None, waiting: WaitingSession | None = None,
                     defer_close: Callable | None = None) -> None:
            assert defer_close is None  # a Triton session closes before its verdict (its files go with it)
            seen["plan"] = plan
            self.out = seen["outcome"]
            self.out.launches = {"kernels": ["gemm_nt_tma_persistent"], "steady": [], "per_call": []}

        def run(self, gate: Callable[[], Verdict | None] | None) -> SessionOutcome:
            files = Path(seen["plan"].load["source"]).parent
            seen["kernel_during_session"] = (files / "kernel.py").read_text()
            seen["gate"] = gate() if gate else "no gate"
            return self.out

    def memcheck(tools: ToolStages, files: TritonFiles, launches: dict, sha: str, problem: Problem, workload: str,
                 result: ResultBuilder) -> None:
        seen["memcheck"] = (files.root, launches["kernels"], sha)

    def evidence(tools: ToolStages, files: TritonFiles, launches: dict, sha: str, problem: Problem, workload: str,
                 arch: Architecture, result: ResultBuilder) -> TargetInstructionEvidence:
        seen["evidence"] = files.root
        return TargetInstructionEvidence(status=TargetInstruction.EXECUTED, source_sha256=sha, tool="ncu (fake)",
                                         profiled_kernels=[ProfiledKernel(name="gemm_nt_tma_persistent", launches=1)])

    monkeypatch.setattr(judge_module, "gpu_available", lambda: True)
    monkeypatch.setattr(judge_module, "CandidateSession", FakeSession)
    monkeypatch.setattr(judge_module, "triton_memcheck", memcheck)
    monkeypatch.setattr(judge_module, "triton_evidence", evidence)
    monkeypatch.setattr(driver, "reset_persisting_l2", lambda: None)
    j = judge_module.GpuJudge(JudgeConfig(cache_dir=tmp_path / "judge", defer_session_close=True))
    j._gpu = judge_module.GpuContext({"gpu_name": "H200 (fake)", "driver_version": "0", "cuda_toolkit": "13",
                                      "torch_version": "x"}, None, None, (9, 0))
    monkeypatch.setattr(j, "workload_state", lambda problem, uuid: "state")
    monkeypatch.setattr(j, "_reference", lambda state, problem, gpu: SimpleNamespace(latency_ms=1.0, call_overhead_ms=0.0))
    return j, seen


def test_a_valid_triton_kernel_runs_the_session_in_mode_triton_on_a_private_workspace(fake_gpu_judge):
    from ptxcore.problems import get_problem
    from ptxcore.schema import TargetInstruction

    j, seen = fake_gpu_judge
    r = j.judge(SOLUTION, get_problem(GEMM), HOPPER, language="triton")
    assert r.status is EvaluationStatus.PASSED and r.performance.speedup_factor == 0.5
    assert r.target_instruction.status is TargetInstruction.EXECUTED and r.compile.flags == ["triton"]
    plan = seen["plan"]
    assert plan.mode is SessionMode.TRITON and plan.enforce_rules and plan.needed == ()
    assert "mode" not in plan.load and seen["kernel_during_session"] == SOLUTION
    root = Path(plan.load["source"]).parent
    assert plan.load["triton_cache"] == str(root / "triton-cache")
    assert seen["memcheck"] == (root, ["gemm_nt_tma_persistent"], r.compile.source_sha256)
    assert seen["evidence"] == root and not root.exists()  # the workspace is gone after the judgement


def test_a_compile_error_in_a_later_call_carries_no_correctness(fake_gpu_judge):
    from ptxcore.gpu.pipeline.triton import NOT_PASSED
    from ptxcore.gpu.pipeline.verdicts import Verdict
    from ptxcore.problems import get_problem
    from ptxcore.schema import TargetInstruction

    j, seen = fake_gpu_judge
    assert seen["outcome"].correctness  # the first calls compared correct before the failing one
    seen["outcome"].verdict = Verdict(EvaluationStatus.COMPILE_ERROR, COMPILE_FAULT.message)
    r = j.judge(SOLUTION, get_problem(GEMM), HOPPER, language="triton")
    assert r.status is EvaluationStatus.COMPILE_ERROR and r.correctness is None and r.reason == COMPILE_FAULT.message
    # the counting run may have run beside memcheck before timing (issue 27); a failed candidate never carries it
    assert r.target_instruction.status is TargetInstruction.UNKNOWN and r.target_instruction.reason == NOT_PASSED


def test_a_rejected_triton_kernel_never_reaches_a_child(fake_gpu_judge):
    from ptxcore.problems import get_problem

    j, seen = fake_gpu_judge
    r = j.judge((CONTROLS / "06_escape_frame_globals.py").read_text(), get_problem(GEMM), HOPPER, language="triton")
    assert r.status is EvaluationStatus.REJECTED and "[reflection]" in r.reason and "plan" not in seen


@pytest.mark.parametrize("entry", ["judge", "sanitize_only", "profile_only"])
def test_every_entry_point_takes_the_port_arguments_to_the_build(fake_gpu_judge, entry):
    """The three entry points share one preamble (lock, build, the early verdict of a kernel that did not build)."""
    from ptxcore.problems import get_problem

    j, seen = fake_gpu_judge
    source = (CONTROLS / "06_escape_frame_globals.py").read_text()
    uuid = get_problem(GEMM).workloads[-1].uuid
    r = getattr(j, entry)(source, get_problem(GEMM), HOPPER, compiled=None, workload_uuid=uuid, language="triton")
    assert r.status is EvaluationStatus.REJECTED and "[reflection]" in r.reason and "plan" not in seen
    assert (r.definition, r.workload_uuid, r.arch) == (GEMM, uuid, HOPPER.key) and r.compile.flags == ["triton"]
