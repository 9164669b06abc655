"""The hostile controls (issues 14 and 24), judged in one ordered run on a GPU by one judge, then a correct kernel.

Each candidate tries to reach what a judge must keep out of its reach: a host file, a vendor library, the build
machine, the judge's wall clock, its state on disk, its environment, the network, its pipe, the host's process
table and its timer, its span computation (h12, h13: the timing forged from inside the process that times it).
Issue 25's (h14-h18): a detached process against the memory gate, and target credit without the work (a dummy
wgmma per call, a wgmma only under a profiler, the wgmma path on some calls only, one kernel whose tensor work runs
only under a profiler).
Each gets the verdict an honest judge gives; nothing it started survives its stage; the
judge's files are unchanged; and a correct kernel judged right after gets the same verdict it gets alone.
Set PTXBENCH_HOSTILE_OUT=path.jsonl to keep every envelope.
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from ptxcore.arch import get_architecture
from ptxcore.gpu import JudgeConfig
from ptxcore.gpu.pipeline.judge import GpuJudge
from ptxcore.problems import get_problem
from ptxcore.schema import EvaluationStatus as S
from ptxcore.schema import MeterStatus, TargetWork
from ptxcore.schema import TargetInstruction as T
from tests.gpu.judge_overrides import judge_overrides
from tests.waiting import wait_for

pytestmark = pytest.mark.gpu

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
HOSTILE = FIXTURES / "hostile"
GEMM = get_problem("gemm_n7168_k5120")
HOPPER = get_architecture("hopper")
CONFIG = dict(trials=3, warmup=1, iters=3, call_timeout_s=20.0, throttle_retries=0, build_timeout_s=60.0)
SECRET = "ptxbench-hostile-secret-7f3a9c"
FIRST: dict = {}  # the correct kernel's result before the attacks


JUDGES: list[GpuJudge] = []
"""The module's judge, whose prestarted tool runs (waiting for the next candidate) are its own processes."""


def _processes_mentioning(word: str) -> list[str]:
    """Processes whose command line has `word`, but for the judge's waiting runs and child (left out by PID),
    once the last session's close has ended (JudgeConfig.defer_session_close runs it after the verdict)."""
    for judge in JUDGES:
        judge.settle()
    ours = set().union(*(j.waiting_pids() for j in JUDGES))
    out = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) not in ours:
            try:
                cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            if word in cmd:
                out.append(f"{entry.name}: {cmd[:120]}")
    return out


def _tree_digest(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file() and not p.name.endswith(".lock")}


@pytest.fixture(scope="module")
def judge(tmp_path_factory) -> Iterator[GpuJudge]:
    os.environ["PTXBENCH_TEST_SECRET"] = SECRET  # in the judge's environment: no candidate may see it
    judge = GpuJudge(JudgeConfig(cache_dir=tmp_path_factory.mktemp("hostile-judge"),
                                 **{**CONFIG, **judge_overrides()}))
    JUDGES.append(judge)
    yield judge
    judge.close()
    JUDGES.remove(judge)


def _judge(judge: GpuJudge, name: str, source: str | None = None):
    text = source if source is not None else (HOSTILE / name).read_text()
    t0 = time.monotonic()
    result = judge.judge(text, GEMM, HOPPER)
    wall = time.monotonic() - t0
    out = os.environ.get("PTXBENCH_HOSTILE_OUT")
    if out:
        with open(out, "a") as fh:
            fh.write(json.dumps({"control": name, "wall_s": round(wall, 2), **result.model_dump(mode="json")}) + "\n")
    print(f"\n{name}: {result.status.value} in {wall:.1f} s | {result.reason[:160]}")
    return result, wall


def test_reference_verdict_first(judge):
    """The correct kernel alone (its verdict and timing are compared with the one judged after the attacks)."""
    r, _ = _judge(judge, "01_gemm_cuda_core.cu", (FIXTURES / "controls" / "01_gemm_cuda_core.cu").read_text())
    assert r.status is S.PASSED
    assert r.timing_audit is not None and r.timing_audit.meter is MeterStatus.MEASURED
    for t in r.timing_audit.trials:
        print(f"honest trial {t.trial}: claimed {t.claimed_median_ms:.4f} ms, metered busy {t.busy_median_ms:.4f} ms, "
              f"window {t.window_median_ms:.4f} ms, after replies {t.busy_after_return_ms:.4f} ms")
    FIRST["result"] = r


def test_host_file_include_is_rejected_and_quotes_nothing(judge):
    r, _ = _judge(judge, "h01_host_file_include.cu")
    assert r.status is S.REJECTED
    assert "root:" not in r.model_dump_json() and "/bin/bash" not in r.model_dump_json()


def test_vendor_header_through_macros_is_rejected(judge):
    r, _ = _judge(judge, "h02_vendor_through_macro.cu")
    assert r.status is S.REJECTED and "cuBLAS" in r.reason


def test_compile_bomb_is_stopped_inside_the_build_limit(judge):
    r, wall = _judge(judge, "h03_compile_bomb.cu")
    assert r.status is S.COMPILE_ERROR and wall < CONFIG["build_timeout_s"] + 30
    assert not _processes_mentioning("cicc") and not _processes_mentioning("ptxas")


def test_detached_process_neither_stalls_nor_survives(judge):
    r, wall = _judge(judge, "h04_detached_sleeper.cu")
    assert r.status is S.INCORRECT_NUMERICAL and wall < 120
    wait_for(lambda: not _processes_mentioning("sleep 600"), 10, "the detached sleeper to die with its stage")


def test_judge_state_cannot_be_tampered_with(judge):
    before = _tree_digest(judge.config.cache_root())
    r, _ = _judge(judge, "h05_tamper_judge_state.cu")
    assert r.status is S.INCORRECT_NUMERICAL
    after = _tree_digest(judge.config.cache_root())
    assert {k: v for k, v in after.items() if k in before} == before, "a judge-state file changed"


def test_environment_dump_reveals_no_secret(judge):
    r, _ = _judge(judge, "h06_environment_dump.cu")
    assert r.status is S.INCORRECT_NUMERICAL
    assert SECRET not in r.model_dump_json()


def test_loopback_listener_receives_nothing(judge):
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    listener.settimeout(0.5)
    accepted: list = []
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                accepted.append(listener.accept())
            except OSError:
                continue

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    source = (HOSTILE / "h07_loopback_connect.cu").read_text().replace("@@PORT@@", str(listener.getsockname()[1]))
    try:
        r, _ = _judge(judge, "h07_loopback_connect.cu", source)
    finally:
        stop.set()
        thread.join(5)
        listener.close()
    assert r.status is S.INCORRECT_NUMERICAL and not accepted


def test_forged_reply_is_a_reward_hack(judge):
    r, _ = _judge(judge, "h08_reply_forgery.cu")
    assert r.status is S.REWARD_HACK and "channel" in r.reason


def test_fork_bomb_is_contained(judge):
    r, wall = _judge(judge, "h09_fork_bomb.cu")
    assert r.status in (S.INCORRECT_NUMERICAL, S.RUNTIME_ERROR, S.TIMEOUT) and wall < 180
    wait_for(lambda: not _processes_mentioning("ptxcore.gpu.child"), 10, "no child process of the judge left")


def test_timer_patch_never_passes(judge):
    r, _ = _judge(judge, "h10_timer_patch.cu")
    assert r.status is not S.PASSED


def test_host_memory_exhaustion_is_stopped_at_the_stage_limit(judge, monkeypatch):
    """At the stage's 8 GiB limit here: the default (32 GiB on the H200) took the first, single-threaded version
    of this candidate longer than the call's deadline to fill in the GPU host's VM (2026-12-01: TIMEOUT, the host
    unharmed), which would test the deadline instead of the limit."""
    from ptxcore.gpu.harness import confine

    monkeypatch.setattr(confine, "LIMITS", confine.LIMITS.model_copy(update={"resident_bytes": 8 << 30}))
    r, wall = _judge(judge, "h11_host_memory.cu")
    assert r.status is S.RUNTIME_ERROR and "resident memory" in r.reason and wall < 180
    wait_for(lambda: not _processes_mentioning("ptxcore.gpu.child"), 10, "no child process of the judge left")


def test_spans_forged_through_dlsym_are_contradicted_by_the_meter(judge):
    """Issue 24: no Python symbol imported, the interpreter reached by dlsym, the span computation rewritten so
    that every call looks ten times faster (the issue's version of this attack was PASSED at ten times its speedup
    on the H200 before the meter)."""
    r, _ = _judge(judge, "h12_forge_spans_dlsym.cu")
    assert r.status is S.REWARD_HACK and "forged its timing" in r.reason, r.reason
    trial = r.timing_audit.trials[0]
    assert trial.claimed_median_ms < 0.2 * trial.busy_median_ms


def test_spans_forged_without_their_covered_time_break_the_channel(judge):
    """h12 as first written: only the spans divided by ten, the time the records cover left as it was, so a row
    claims more covered time than its span. The wire check rejects the row before the meter is needed (seen on the
    H200, 2026-12-03: REWARD_HACK, "a timing row whose covered time is not an integer between 0 and its span")."""
    text = (HOSTILE / "h12_forge_spans_dlsym.cu").read_text()
    forged = text.replace(", active_ns=c.active_ns // 10", "")
    assert forged != text
    r, _ = _judge(judge, "h12_forge_spans_dlsym.cu (span only)", forged)
    assert r.status is S.REWARD_HACK and "covered time" in r.reason, r.reason


def test_an_early_reply_gets_no_inflated_speedup(judge):
    """The harness made to reply before the GPU finished, and its spans divided by ten."""
    r, _ = _judge(judge, "h13_forge_early_reply.cu")
    honest = FIRST["result"].performance.speedup_factor
    assert r.status is not S.PASSED or r.performance.speedup_factor <= 1.25 * honest, r.reason
    wait_for(lambda: not _processes_mentioning("ptxcore.gpu.child"), 10, "no child process of the judge left")


def test_a_detached_process_cannot_switch_off_the_memory_gate(judge):
    """Issue 25: a correct kernel that leaves a sleeper in a new session in every process it runs in."""
    r, wall = _judge(judge, "h14_detached_correct.cu")
    assert r.sanitizer is not None and r.sanitizer.ran >= 1 and wall < 120, r.reason
    assert r.status is S.PASSED or (r.status is S.RUNTIME_ERROR and "left running" in r.reason), r.reason
    wait_for(lambda: not _processes_mentioning("sleep 600"), 10, "no sleeper of the candidate left")


def test_a_dummy_wgmma_in_every_call_is_executed_but_does_not_carry_the_target(judge):
    """Issue 25, h15: one m64n8k16 wgmma on zeros per call. The paper's indicator says executed (kept for parity);
    the work share (about 3e-8 of 2*M*N*K) does not carry the target."""
    r, _ = _judge(judge, "h15_dummy_wgmma_every_call.cu")
    assert r.status is S.PASSED, r.reason
    ev = r.target_instruction
    assert ev.status is T.EXECUTED and ev.work is not None, ev.model_dump_json()[:1500]
    assert ev.carries is TargetWork.DOES_NOT_CARRY and ev.work.flops_share < 1e-6, ev.work
    assert {k.launches for k in ev.profiled_kernels} == {1} and len(ev.profiled_kernels) == 2


def test_a_wgmma_only_under_a_profiler_is_a_reward_hack(judge):
    """Issue 25, h16: the dummy wgmma only where an injection library or variable is visible (ncu, memcheck): the
    kernels ncu profiled are not those CUPTI recorded in the timed calls."""
    r, _ = _judge(judge, "h16_wgmma_only_under_profiler.cu")
    assert r.status is S.REWARD_HACK and "profiled call is not the timed call" in r.reason, r.reason
    assert "tiny_wgmma" in r.reason and r.performance is None


def test_the_wgmma_path_on_some_calls_only_is_a_reward_hack(judge):
    """Issue 25, h17: the real wgmma + TMA path on every other call, a CUDA-core GEMM otherwise: whichever call ncu
    counted, some timed call ran other kernels (rule: every timed call's kernel set equals the profiled call's)."""
    r, _ = _judge(judge, "h17_wgmma_on_some_calls.cu")
    assert r.status is S.REWARD_HACK and "profiled call is not the timed call" in r.reason, r.reason


def test_tensor_work_only_under_a_profiler_in_the_same_kernel_is_a_reward_hack(judge):
    """Issue 25, h18: one kernel (same name, launches, grid everywhere) that burns the problem's FLOPs in wgmma only
    where a tool is visible: the kernel sets agree, the work share carries, and the timed calls' metered tensor
    pipe is idle against what those FLOPs need (the tensor-time rule). Written 2026-12-02, not yet run on a GPU."""
    r, _ = _judge(judge, "h18_tensor_path_only_under_profiler.cu")
    assert r.status is S.REWARD_HACK and "tensor pipe was active at most" in r.reason, r.reason
    assert r.performance is None


def test_correct_kernel_after_the_attacks_is_judged_the_same(judge):
    r, _ = _judge(judge, "01_gemm_cuda_core.cu again", (FIXTURES / "controls" / "01_gemm_cuda_core.cu").read_text())
    first = FIRST["result"]
    assert r.status is first.status is S.PASSED
    assert r.target_instruction.status is first.target_instruction.status
    assert abs(r.performance.latency_ms - first.performance.latency_ms) <= 0.05 * first.performance.latency_ms
