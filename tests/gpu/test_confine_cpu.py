"""The candidate's GPU stages in the OS sandbox, checked on a CPU host with the real bubblewrap: what a child
session, memcheck or ncu run of a candidate can see, write, reach and leave behind."""

from __future__ import annotations

import os
import socket
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from ptxcore.gpu.harness.confine import LIBRARY_NAME, StageSandbox, hidden_links, stage_policy
from ptxcore.gpu.harness.triton import TritonFiles
from ptxcore.sandbox import MountKind, SandboxStatus, find_bwrap, presets
from tests.waiting import wait_for

try:
    find_bwrap()
except Exception:  # noqa: BLE001 - the sandbox's own tests say why
    pytest.skip("bubblewrap is not installed here", allow_module_level=True)

REPO = Path(__file__).resolve().parents[2]


def _py(stage: StageSandbox, code: str, *args: str):
    return stage.run([sys.executable, "-c", code, *args], 60)


def test_the_policy_mounts_nothing_of_the_judge(tmp_path, monkeypatch):
    monkeypatch.setenv("PTXBENCH_CACHE_DIR", str(tmp_path / "cache"))
    targets = {m.target for m in stage_policy("memcheck", None).mounts}
    for private in (str(REPO), str(REPO / "runs"), str(REPO / "mlruns"), str(Path.home() / ".cache"),
                    str(tmp_path / "cache")):
        assert private not in targets
    assert str(REPO / "ptxcore") in targets and str(REPO / "problems") in targets


def test_a_built_library_is_copied_in_and_the_cache_entry_stays_unseen(tmp_path):
    cache = tmp_path / "judge-cache" / "compile" / "abc"
    cache.mkdir(parents=True)
    lib = cache / "kernel.so"
    lib.write_bytes(b"\x7fELF candidate")
    (cache / "manifest.json").write_text('{"secret": "judge state"}')
    with StageSandbox("child", lib) as stage:
        assert stage.candidate == Path("/scratch") / LIBRARY_NAME
        out = _py(stage, "import os, sys; print(open(sys.argv[1], 'rb').read()[:4]);"
                  "print(os.path.exists(sys.argv[2]), os.path.exists(sys.argv[3]))",
                  str(stage.candidate), str(lib), str(cache / "manifest.json"))
    assert out.ok, out.stderr
    assert out.stdout.split() == ["b'\\x7fELF'", "False", "False"]


def test_judge_files_are_neither_readable_nor_writable(tmp_path):
    state = tmp_path / "reference.json"
    state.write_text("{}")
    with StageSandbox("child", None) as stage:
        out = _py(stage, "import sys\ntry:\n    open(sys.argv[1], 'a').write('x')\n    print('wrote')\n"
                  "except OSError as e:\n    print('refused', type(e).__name__)", str(state))
        touch = stage.run(["/bin/sh", "-c", f"touch {REPO}/ptxcore/planted 2>&1; echo rc=$?"], 30)
    assert out.stdout.startswith("refused") and state.read_text() == "{}"
    assert "rc=0" not in touch.stdout and not (REPO / "ptxcore" / "planted").exists()


def test_no_network_to_a_loopback_listener():
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    port = listener.getsockname()[1]
    try:
        with StageSandbox("child", None) as stage:
            out = _py(stage, "import socket, sys\ntry:\n    socket.create_connection(('127.0.0.1', int(sys.argv[1])), 3)\n"
                      "    print('connected')\nexcept OSError as e:\n    print('refused')", str(port))
        listener.settimeout(0.2)
        with pytest.raises(TimeoutError):
            listener.accept()
    finally:
        listener.close()
    assert out.stdout.strip() == "refused"


def test_a_detached_process_dies_with_the_stage():
    marker = f"600.{os.getpid()}{int(time.time())}"
    with StageSandbox("child", None) as stage:
        proc = stage.spawn(["/bin/sh", "-c", f"setsid sleep {marker} & sleep 30"])
        # the judge sees the processes inside (for /proc/PID/maps): the shell and its detached sleep
        wait_for(lambda: len(proc.member_pids()) >= 2, 20, "both processes inside the stage")
        stage.kill(proc)
    wait_for(lambda: not [p for p in Path("/proc").iterdir() if p.name.isdigit() and _cmdline(p).find(marker) >= 0],
             10, "the detached sleep to die with the stage")


def _cmdline(p: Path) -> str:
    try:
        return (p / "cmdline").read_bytes().decode(errors="replace")
    except OSError:
        return ""


def test_a_signal_death_reads_as_a_signal():
    with StageSandbox("child", None) as stage:
        proc = stage.spawn(["/bin/sh", "-c", "kill -SEGV $$"])
        proc.popen.wait(30)
        assert proc.exit_code() == -11


def test_triton_files_source_read_only_cache_writable(tmp_path):
    files = TritonFiles.create("import triton\n", parent=tmp_path)
    try:
        with StageSandbox("child", files) as stage:
            assert stage.candidate is files
            out = stage.run(["/bin/sh", "-c", f"cat {files.source}; echo cubin > {files.cache}/k.cubin && echo ok;"
                             f" echo x >> {files.source} 2>/dev/null || echo ro"], 30)
        assert out.ok and out.stdout.split() == ["import", "triton", "ok", "ro"]
        assert (files.cache / "k.cubin").read_text() == "cubin\n"
        assert files.source.read_text() == "import triton\n"
    finally:
        files.remove()


@pytest.mark.skipif(os.geteuid() != 0, reason="the drop to nobody happens where the judge runs as root")
def test_a_triton_stage_runs_as_nobody_with_this_python(tmp_path):
    """Issue 24: on the H200 every Triton memcheck and ncu stage ran as root, since nobody could not reach the
    candidate's kernel.py in the judge's private (0700) workspace; nor, where Python lives under /root, the
    interpreter. Both are staged for nobody now: the stage runs this interpreter as 65534, reads kernel.py and
    writes the Triton cache."""
    files = TritonFiles.create("import triton\n", parent=tmp_path)
    assert files.root.stat().st_mode & 0o777 == 0o700
    code = (f"import os; print(os.getuid()); print(open({str(files.source)!r}).read().split()[1]); "
            f"open({str(files.cache / 'k.cubin')!r}, 'w').write('cubin')")
    try:
        for stage_name in ("memcheck", "ncu"):
            with StageSandbox(stage_name, files) as stage:
                out = stage.run([sys.executable, "-c", code], 60)
            assert out.ok and out.stdout.split() == ["65534", "triton"], out.stderr[-800:]
            assert (files.cache / "k.cubin").read_text() == "cubin"
    finally:
        files.remove()


def test_links_under_usr_local_are_recreated_once(tmp_path):
    links = hidden_links(["/usr/local/cuda/bin/ncu", "/usr/local/cuda/lib64", str(tmp_path)])
    if not Path("/usr/local/cuda").is_symlink():
        assert links == ()
        return
    assert [(m.kind, m.target, m.source) for m in links] == [
        (MountKind.SYMLINK, "/usr/local/cuda", os.path.realpath("/usr/local/cuda"))]


def test_a_tool_found_through_a_host_link_runs(tmp_path):
    """find_tool may answer /usr/local/cuda/bin/X: the stage starts it by its real path."""
    real = tmp_path / "real-tool"
    real.write_text("#!/bin/sh\necho tool ran\n")
    real.chmod(0o755)
    link = tmp_path / "link-tool"
    link.symlink_to(real)
    with StageSandbox("memcheck", None) as stage:
        stage.box.policy = stage.box.policy.model_copy(update={"mounts": (*stage.box.policy.mounts,
                                                                          *presets.tree_mounts([real]))})
        out = stage.run([str(link)], 30)
    assert out.ok and out.stdout.strip() == "tool ran"


def test_the_session_child_starts_in_the_sandbox():
    """The real child session of mode ffi: on a CPU host it starts inside the sandbox and reports why it
    cannot run (no driver), through the judge's channel."""
    from ptxcore.gpu import gpu_available
    from ptxcore.gpu.harness.isolation import ChildDied, ChildProcess
    from ptxcore.gpu.messages import SessionMode

    if gpu_available():
        pytest.skip("needs a host without a GPU")
    with pytest.raises(ChildDied) as info:
        ChildProcess.spawn(device=0, mode=SessionMode.FFI, startup_timeout_s=60, candidate=None)
    assert "child failed to start" in str(info.value) and "libcuda" in str(info.value)


def test_timeouts_kill_the_stage():
    with StageSandbox("ncu", None) as stage:
        started = time.monotonic()
        out = stage.run(["/bin/sh", "-c", "sleep 60"], 1.0)
    assert out.status is SandboxStatus.TIMED_OUT and time.monotonic() - started < 15


def test_a_link_the_binds_would_recreate_is_kept_once():
    """The H200 host: /usr/local/nvidia/lib is a link that both the driver-library binds (link text) and the
    LD_LIBRARY_PATH links (resolved) recreate; bwrap refuses a second symlink at one place."""
    from ptxcore.gpu.harness.confine import _with_links
    from ptxcore.sandbox import Mount, ro

    tmpfs = Mount(kind=MountKind.TMPFS, target="/usr/local")
    old = Mount(kind=MountKind.SYMLINK, target="/usr/local/nvidia/lib", source="lib64")
    below = Mount(kind=MountKind.SYMLINK, target="/usr/local/nvidia/lib/x", source="y")
    new = Mount(kind=MountKind.SYMLINK, target="/usr/local/nvidia/lib", source="/usr/local/nvidia/lib64")
    bind = ro("/usr/local/nvidia/lib64")
    assert _with_links([ro("/usr"), tmpfs, old, below, bind], (new,)) == [ro("/usr"), tmpfs, new, bind]


def test_the_judge_reads_the_maps_of_the_process_inside(tmp_path):
    """The library rule reads /proc/PID/maps of every process in the sandbox's PID namespace: the copied
    candidate library, loaded by a grandchild of the namespace's init, is among them."""
    import ctypes.util
    import shutil

    from ptxcore.gpu.harness.deps import parse_maps

    libm = Path(ctypes.util.find_library("m") or "libm.so.6")
    real = next((p for p in (Path("/lib/x86_64-linux-gnu") / libm.name, Path("/usr/lib64") / libm.name)
                 if p.exists()), None)
    if real is None:
        pytest.skip("no libm file to stand in for a candidate library")
    lib = tmp_path / "candidate.so"
    shutil.copyfile(real, lib)
    with StageSandbox("child", lib) as stage:
        proc = stage.spawn(["/bin/sh", "-c", f"{sys.executable} -c \"import ctypes, time; "
                            f"ctypes.CDLL('{stage.candidate}'); print('loaded', flush=True); time.sleep(30)\""])
        wait_for(lambda: str(stage.candidate) in [m for pid in proc.member_pids() for m in _maps(pid, parse_maps)],
                 10, "the candidate library in the maps of a process inside")
        stage.kill(proc)


def _maps(pid: int, parse: Callable[[str], list[str]]) -> list[str]:
    try:
        return parse(Path(f"/proc/{pid}/maps").read_text())
    except OSError:
        return []


def test_every_gpu_stage_has_a_resident_memory_limit(monkeypatch):
    """No address-space limit (CUDA reserves huge ranges), but a resident-memory one: 32 GiB, or half the host;
    a stage that grows past it is killed whole."""
    from ptxcore.gpu.harness import confine

    physical = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    for stage in ("child", "memcheck", "ncu"):
        limits = stage_policy(stage, None).limits
        assert limits.address_space_bytes is None
        assert limits.resident_bytes == min(32 << 30, physical // 2)
        assert limits.cpu_time_s == 1800 and limits.file_size_bytes == 8 << 30 and limits.processes == 512
    monkeypatch.setattr(confine, "LIMITS", confine.LIMITS.model_copy(update={"resident_bytes": 128 << 20}))
    with StageSandbox("memcheck", None) as stage:
        out = stage.run(["/bin/bash", "-c", "x=$(head -c 600000000 /dev/zero | tr '\\0' x); echo survived"], 60)
    assert out.status is SandboxStatus.MEMORY_LIMIT and "survived" not in out.stdout


def test_a_memcheck_run_killed_for_memory_is_its_own_outcome(tmp_path, monkeypatch):
    from ptxcore.gpu.harness import confine
    from ptxcore.gpu.harness.sanitizer import MemcheckOutcome, run_memcheck

    lib = tmp_path / "candidate.so"
    lib.write_bytes(b"\x7fELF stand-in")
    monkeypatch.setattr(confine, "LIMITS", confine.LIMITS.model_copy(update={"resident_bytes": 128 << 20}))
    runs = run_memcheck(lib, lambda inside: ["/bin/bash", "-c", "x=$(head -c 600000000 /dev/zero | tr '\\0' x)"],
                        60, 2)
    assert [r.outcome for r in runs] == [MemcheckOutcome.MEMORY_LIMIT]
    assert "GiB of resident memory, over the stage's limit" in runs[0].report.splitlines()[0]


def test_the_baseline_session_keeps_flashinfer_s_jit_cache_across_sessions(monkeypatch, tmp_path):
    """Its home is a throw-away folder, so FlashInfer's JIT cache would be rebuilt in every session (96 s for batch
    prefill on the H200, past the call deadline): the baseline gets a cache folder that outlives it."""
    from ptxcore.gpu.harness.isolation import baseline_env, child_env
    from ptxcore.gpu.pipeline.judge import BASELINE_CALL_TIMEOUT_S

    monkeypatch.delenv("FLASHINFER_WORKSPACE_BASE", raising=False)
    monkeypatch.setenv("PTXBENCH_CACHE_DIR", str(tmp_path / "cache"))
    env = child_env(baseline_env(), workdir=tmp_path / "home")
    assert env["FLASHINFER_WORKSPACE_BASE"] == str(tmp_path / "cache" / "flashinfer")
    assert env["HOME"] == str(tmp_path / "home")
    monkeypatch.setenv("FLASHINFER_WORKSPACE_BASE", "/srv/fi")
    assert baseline_env() == {"FLASHINFER_WORKSPACE_BASE": "/srv/fi"}
    assert BASELINE_CALL_TIMEOUT_S >= 120


def test_a_stage_process_spinning_on_the_cpu_is_ended_by_its_cpu_limit(monkeypatch):
    from ptxcore.gpu.harness import confine

    monkeypatch.setattr(confine, "LIMITS", confine.LIMITS.model_copy(update={"cpu_time_s": 1}))
    with StageSandbox("ncu", None) as stage:
        out = stage.run(["/bin/sh", "-c", "while :; do :; done"], 30)
    assert out.status is SandboxStatus.SIGNALED and out.signal in (24, 9)  # SIGXCPU, then SIGKILL at the hard limit


def test_a_process_the_candidate_detached_is_ended_after_its_calls():
    """Issue 25: under memcheck and ncu the standalone child ends, after its calls, every process of its sandbox
    that left its session (a detached sleeper), so no tool waits for it; its own ancestors (the tool) stay."""
    code = ("import os, subprocess, sys, time\n"
            "p = subprocess.Popen(['/bin/sleep', '600'], start_new_session=True)\n"
            "same = subprocess.Popen(['/bin/sleep', '600'])\n"
            "from ptxcore.gpu.child.standalone import end_detached_processes\n"
            "n = end_detached_processes()\n"
            "ended = p.wait(timeout=20) is not None\n"  # its end, not a grace period (TimeoutExpired fails the run)
            "print(n, ended, same.poll() is None)\n"
            "same.kill()\n")
    with StageSandbox("memcheck", None) as stage:
        out = stage.run(["/bin/sh", "-c", f"{sys.executable} -c \"$0\"", code], 60)
    assert out.ok, out.stderr
    assert out.stdout.split() == ["1", "True", "True"]


def test_outside_a_sandbox_nothing_is_ended(tmp_path):
    from ptxcore.gpu.child.standalone import end_detached_processes

    fake = tmp_path / "proc"
    (fake / "1").mkdir(parents=True)
    (fake / "1" / "cmdline").write_bytes(b"/sbin/init\0")
    (fake / "4242").mkdir()
    assert end_detached_processes(fake) == 0
