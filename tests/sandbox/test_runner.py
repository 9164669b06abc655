"""The sandbox itself, attacked from inside: network, files, environment, survivors, limits."""

from __future__ import annotations

import os
import random
import shutil
import socket
import time
from pathlib import Path

import pytest

from ptxcore.sandbox import (
    Limits,
    Sandbox,
    SandboxOutcome,
    SandboxStatus,
    SandboxUnavailableError,
    presets,
    run,
)
from ptxcore.schema import SandboxMode
from tests.waiting import wait_for

from .conftest import processes_matching


def sh(script: str, policy, timeout_s: float = 20) -> SandboxOutcome:
    return run(["/bin/sh", "-c", script], policy, timeout_s)


def test_exit_code_and_both_streams_are_captured(policy):
    out = sh("echo out; echo err >&2; exit 7", policy)
    assert out.status is SandboxStatus.EXITED and out.exit_code == 7 and out.signal is None
    assert out.stdout == "out\n" and out.stderr == "err\n" and out.mode is SandboxMode.BWRAP


def test_output_beyond_the_cap_is_counted_not_kept(policy):
    capped = policy.model_copy(update={"output_limit_bytes": 1000})
    out = sh("head -c 50000 /dev/zero | tr '\\0' x", capped)
    assert len(out.stdout) == 1000 and out.stdout_dropped_bytes == 49000


def test_no_network_even_to_a_loopback_listener_of_the_host(policy):
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    port = server.getsockname()[1]
    try:
        out = run(["/bin/bash", "-c", f"exec 3<>/dev/tcp/127.0.0.1/{port} && echo CONNECTED"], policy, 20)
        server.settimeout(0.5)
        with pytest.raises(TimeoutError):
            server.accept()
    finally:
        server.close()
    assert "CONNECTED" not in out.stdout and out.exit_code != 0


def test_home_host_tmp_and_etc_are_not_visible(policy, tmp_path):
    secret = "sk-test-" + "".join(random.choices("abcdef0123456789", k=24))
    home_file = Path.home() / f".ptxbench-sandbox-test-{os.getpid()}"
    home_file.write_text(secret)
    (tmp_path / "keys.env").write_text(secret)
    try:
        out = sh(f"cat {home_file} {tmp_path}/keys.env /etc/passwd /etc/shadow; ls -a {Path.home()} /tmp; "
                 "echo done", policy)
    finally:
        home_file.unlink()
    assert secret not in out.output and "root:x:0" not in out.output and out.stdout.endswith("done\n")
    assert "No such file" in out.stderr


def test_nothing_is_writable_but_scratch_and_tmp(policy):
    with Sandbox(policy) as box:
        out = box.run(["/bin/sh", "-c", "for p in /x /usr/x /usr/local/x /etc/x /bin/x /proc/x; do "
                       "touch $p 2>/dev/null && echo WROTE $p; done; echo hi > /scratch/out; echo t > /tmp/t"],
                      timeout_s=20)
        assert "WROTE" not in out.stdout and out.ok
        assert (box.scratch / "out").read_text() == "hi\n"
        root = box.scratch.parent
    assert not root.exists(), "the scratch directory is removed with the sandbox"


def test_environment_is_only_the_policy_s(policy, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-should-not-leak")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3")
    passing = policy.model_copy(update={"env_passthrough": ("CUDA_VISIBLE_DEVICES",)})
    out = sh("env", passing)
    assert "sk-should-not-leak" not in out.stdout and "CUDA_VISIBLE_DEVICES=3" in out.stdout
    names = {line.split("=", 1)[0] for line in out.stdout.splitlines()}
    assert names <= {"PATH", "CUDA_VISIBLE_DEVICES", "PWD", "SHLVL", "_"}, names


def test_no_capabilities_no_host_processes_no_nested_user_namespaces(policy):
    out = sh("grep CapEff /proc/self/status; ls /proc | grep -c '^[0-9]'; unshare -U true && echo NESTED",
             policy)
    cap, count = out.stdout.split("\n")[:2]
    assert cap.split()[1] == "0000000000000000"
    assert int(count) < 10, "only the sandbox's own processes are visible"
    assert "NESTED" not in out.stdout


def test_a_detached_descendant_does_not_outlive_the_command(policy):
    marker = f"1000.{random.randrange(10**9)}"
    out = sh(f"setsid sleep {marker} & setsid -f sleep {marker}; echo started", policy)
    assert out.ok and out.stdout == "started\n"
    wait_for(lambda: processes_matching(marker) == [], 10, "the detached sleeps to die with the sandbox")


def test_timeout_kills_the_whole_sandbox_and_removes_scratch(policy):
    marker = f"1000.{random.randrange(10**9)}"
    started = time.monotonic()
    with Sandbox(policy) as box:
        out = box.run(["/bin/sh", "-c", f"setsid sleep {marker} & sleep {marker}"], timeout_s=1.0)
        root = box.scratch.parent
    assert out.status is SandboxStatus.TIMED_OUT and time.monotonic() - started < 8
    assert processes_matching(marker) == [] and not root.exists()


@pytest.mark.skipif(os.geteuid() != 0, reason="process limit as nobody is tested where the suite runs as root")
def test_fork_bomb_is_held_by_the_process_limit(policy):
    small = policy.model_copy(update={"limits": Limits(processes=40)})
    started = time.monotonic()
    out = run(["/bin/bash", "-c", "b() { b | b & }; b; sleep 2; echo survived"], small, 30)
    assert out.status is SandboxStatus.EXITED and "survived" in out.stdout
    assert time.monotonic() - started < 20
    assert "Resource temporarily unavailable" in out.stderr


def test_file_size_limit_stops_a_writer(policy):
    limited = policy.model_copy(update={"limits": Limits(file_size_bytes=1 << 20)})
    out = sh("head -c 5000000 /dev/zero > /scratch/big; echo rc=$?", limited)
    assert "rc=0" not in out.stdout  # SIGXFSZ or EFBIG


@pytest.mark.skipif(not Path("/usr/bin/python3").exists(), reason="needs the system python3")
def test_memory_limit_stops_an_allocator(policy):
    limited = policy.model_copy(update={"limits": Limits(address_space_bytes=256 << 20)})
    out = run(["/usr/bin/python3", "-c", "b = bytearray(1 << 30); print('allocated')"], limited, 30)
    assert "allocated" not in out.stdout and "MemoryError" in out.stderr


def _grow(megabytes: int) -> str:
    """Shell that holds about `megabytes` MB in one process (bash keeps a command substitution in memory)."""
    return f"x=$(head -c {megabytes * 1000000} /dev/zero | tr '\\0' x)"


def test_resident_limit_kills_a_growing_process_without_an_address_space_limit(policy):
    limited = policy.model_copy(update={"limits": Limits(address_space_bytes=None, resident_bytes=128 << 20)})
    started = time.monotonic()
    out = run(["/bin/bash", "-c", _grow(600) + "; sleep 5; echo survived"], limited, 60)
    assert out.status is SandboxStatus.MEMORY_LIMIT and out.resident_bytes > 128 << 20
    assert "survived" not in out.stdout and time.monotonic() - started < 30


def test_resident_limit_counts_every_process_of_the_sandbox(policy):
    marker = f"1000.{random.randrange(10**9)}"
    limited = policy.model_copy(update={"limits": Limits(address_space_bytes=None, resident_bytes=200 << 20)})
    script = f"for i in 1 2 3 4 5 6; do ( {_grow(70)}; setsid sleep {marker} ) & done; wait; echo survived"
    out = run(["/bin/bash", "-c", script], limited, 60)
    assert out.status is SandboxStatus.MEMORY_LIMIT and "survived" not in out.stdout
    wait_for(lambda: processes_matching(marker) == [], 10, "every process of the killed sandbox to be gone")


def test_resident_limit_leaves_a_modest_process_alone(policy):
    limited = policy.model_copy(update={"limits": Limits(address_space_bytes=None, resident_bytes=512 << 20)})
    out = run(["/bin/bash", "-c", _grow(20) + "; echo fine"], limited, 60)
    assert out.ok and out.stdout == "fine\n"


def test_a_spawned_sandbox_killed_for_memory_says_so(policy):
    limited = policy.model_copy(update={"limits": Limits(address_space_bytes=None, resident_bytes=96 << 20)})
    with Sandbox(limited) as box:
        proc = box.spawn(["/bin/bash", "-c", _grow(400) + "; sleep 30"])
        proc.popen.wait(timeout=30)
        note = proc.limit_note()
    assert note is not None and "resident memory" in note and "0.09 GiB limit" in note


def test_outcome_carries_resident_bytes_exactly_for_a_memory_kill():
    with pytest.raises(ValueError, match="resident_bytes"):
        SandboxOutcome(status=SandboxStatus.MEMORY_LIMIT, duration_s=1.0, mode=SandboxMode.BWRAP)
    with pytest.raises(ValueError, match="resident_bytes"):
        SandboxOutcome(status=SandboxStatus.EXITED, exit_code=0, resident_bytes=1, duration_s=1.0,
                       mode=SandboxMode.BWRAP)
    with pytest.raises(ValueError):
        Limits(resident_bytes=0)


def test_missing_bwrap_is_an_infrastructure_error(policy, monkeypatch):
    monkeypatch.setenv("PTXBENCH_BWRAP", "/nonexistent/bwrap")
    with pytest.raises(SandboxUnavailableError, match="PTXBENCH_BWRAP"):
        sh("true", policy)


def test_the_probe_follows_the_bwrap_binary(policy, monkeypatch):
    """A probe's answer belongs to one bwrap: a missing binary once does not refuse the real one after."""
    monkeypatch.setenv("PTXBENCH_BWRAP", "/nonexistent/bwrap")
    with pytest.raises(SandboxUnavailableError, match="PTXBENCH_BWRAP"):
        sh("true", policy)
    monkeypatch.undo()  # the machine's own bwrap again
    assert sh("echo fine", policy).stdout == "fine\n"


def test_a_broken_mount_is_an_infrastructure_error_not_an_exit_code(policy):
    broken = policy.model_copy(update={"mounts": (*policy.mounts, *presets.tree_mounts([]),
                                                  presets.ro("/nonexistent-for-test"))})
    with pytest.raises(SandboxUnavailableError):
        sh("true", broken)


def test_opt_out_is_recorded_and_loud(policy, monkeypatch, caplog):
    monkeypatch.setenv("PTXBENCH_UNSANDBOXED", "1")
    out = sh("echo hi", policy)
    assert out.mode is SandboxMode.UNSANDBOXED and out.stdout == "hi\n"
    assert any("SANDBOX DISABLED" in r.message for r in caplog.records)


def test_policy_refuses_mounts_over_scratch_or_tmp(policy):
    with pytest.raises(ValueError, match="scratch"):
        policy.model_copy(update={}).model_validate(
            {**policy.model_dump(), "mounts": [{"kind": "ro_bind", "target": "/scratch/x", "source": "/usr"}]})
    with pytest.raises(ValueError):
        policy.model_validate({**policy.model_dump(), "mounts": [{"kind": "ro_bind", "target": "/"}]})


@pytest.mark.skipif(os.geteuid() != 0, reason="profiling_admin needs a root caller")
def test_profiling_admin_keeps_only_cap_sys_admin_and_stays_read_only(policy):
    from ptxcore.sandbox import RunAs

    admin = policy.model_copy(update={"run_as": RunAs.CALLER, "profiling_admin": True})
    out = sh("grep CapEff /proc/self/status; touch /usr/x 2>/dev/null && echo WROTE; echo done", admin)
    assert out.stdout.split("\n")[0].split()[1] == f"{1 << 21:016x}" and "WROTE" not in out.stdout
    with pytest.raises(ValueError, match="run_as=caller"):
        policy.model_validate({**policy.model_dump(), "profiling_admin": True})


def test_gpu_stage_policy_runs_this_python_with_its_packages():
    import sys

    from ptxcore.sandbox import RunAs

    site = [p for p in sys.path if p.endswith("site-packages")]
    gpu = presets.gpu_stage_policy("gpu-test", python_paths=site, run_as=RunAs.CALLER)
    assert gpu.limits.address_space_bytes is None and "CUDA_VISIBLE_DEVICES" in gpu.env_passthrough
    out = run([sys.executable, "-c", "import pydantic; print('ok', pydantic.VERSION)"], gpu, 60)
    assert out.ok and out.stdout.startswith("ok "), out.stderr[-500:]


def test_gpu_stage_policy_mounts_a_tool_installed_outside_the_toolkit(tmp_path):
    """A tool found through a link into its own install folder (ncu under /opt) runs inside, with the files
    beside it; the folder holding the link is not mounted."""

    install = tmp_path / "opt" / "tool-2025.3"
    install.mkdir(parents=True)
    (install / "sections.txt").write_text("sections beside the launcher\n")
    launcher = install / "faketool"
    launcher.write_text('#!/bin/sh\ncat "$(dirname "$0")/sections.txt"\n')
    launcher.chmod(0o755)
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "faketool").symlink_to(launcher)
    (bindir / "secret").write_text("not for the candidate\n")
    root = presets.tool_install_dir(bindir / "faketool")
    assert root == install.resolve()
    gpu = presets.gpu_stage_policy("gpu-tool", tool_paths=[root])  # below pytest's 0700 tmp: staged as root
    out = run(["faketool"], gpu, 30)
    assert out.ok and out.stdout == "sections beside the launcher\n", out.stderr[-500:]
    assert not sh(f"cat {bindir / 'secret'}", gpu).ok


# -- as nobody, whatever the host paths (issue 26: a Python under /root made every sandbox run as root) --------
root_only = pytest.mark.skipif(os.geteuid() != 0, reason="the drop to nobody happens where the caller is root")


def _private(tmp_path: Path) -> Path:
    """A directory nobody may not search (mode 0700, like /root), with a readable tree below it."""
    home = tmp_path / "home-0700"
    (home / "pkg").mkdir(parents=True)
    (home / "pkg" / "data.txt").write_text("reached\n")
    (home / "pkg").chmod(0o755)
    (home / "pkg" / "data.txt").chmod(0o644)
    home.chmod(0o700)
    return home


@root_only
def test_a_source_below_a_private_directory_is_reached_as_nobody(policy, tmp_path):
    pkg = _private(tmp_path) / "pkg"
    mounted = policy.model_copy(update={"name": "test-private", "mounts": (*policy.mounts, presets.ro(str(pkg)))})
    with Sandbox(mounted) as box:
        out = box.run(["/bin/sh", "-c", f"id -u; cat {pkg}/data.txt; grep -c '{box.scratch.parent}/reach' "
                                         "/proc/self/mountinfo; echo done"], timeout_s=20)
        host_mounts = Path("/proc/self/mountinfo").read_text()
        staged = box.scratch.parent / "reach"
        assert staged.is_dir() and str(staged) not in host_mounts  # the staging bind never reached the host
    # inside: the source's own path shows its files, and no staging point is visible
    assert out.ok and out.stdout.splitlines() == ["65534", "reached", "0", "done"], out.stderr


@root_only
def test_this_python_runs_as_nobody_wherever_it_is_installed():
    import sys

    site = [p for p in sys.path if p.endswith("site-packages")]
    gpu = presets.gpu_stage_policy("gpu-nobody", python_paths=site)
    out = run([sys.executable, "-c", "import os, pydantic; print(os.getuid(), pydantic.VERSION)"], gpu, 60)
    assert out.ok and out.stdout.split()[0] == "65534", out.stderr[-500:]


@root_only
def test_a_bwrap_carried_into_a_private_folder_starts_as_nobody(policy, tmp_path, monkeypatch):
    from ptxcore.sandbox import find_bwrap

    folder = _private(tmp_path) / "pkg"
    wrapper = folder / "bwrap"
    wrapper.write_text(f'#!/bin/sh\nexec {find_bwrap()} "$@"\n')
    wrapper.chmod(0o755)
    monkeypatch.setenv("PTXBENCH_BWRAP", str(wrapper))
    out = sh("id -u", policy.model_copy(update={"name": "test-carried-bwrap"}))
    assert out.ok and out.stdout == "65534\n", out.stderr


@root_only
def test_a_sandbox_that_cannot_start_as_nobody_does_not_start_as_root(policy, tmp_path, monkeypatch):
    """A bwrap that works for root only: the sandbox refuses, naming why, instead of running the command as root."""
    from ptxcore.sandbox import find_bwrap

    wrapper = tmp_path / "bwrap-root-only"
    wrapper.write_text('#!/bin/sh\n[ "$(id -u)" = 0 ] || { echo "bwrap: only root may run this one" >&2; '
                       f'exit 1; }}\nexec {find_bwrap()} "$@"\n')
    wrapper.chmod(0o755)
    tmp_path.chmod(0o755)
    monkeypatch.setenv("PTXBENCH_BWRAP", str(wrapper))
    marker = tmp_path / "ran"
    with pytest.raises(SandboxUnavailableError, match=r"cannot run as nobody \(bwrap: only root may run this "
                                                      r"one\), and candidate code never runs as root"):
        sh(f"touch {marker}", policy.model_copy(update={"name": "test-root-only"}))
    assert not marker.exists()


def test_reach_stages_only_what_the_user_cannot_search(tmp_path):
    from ptxcore.sandbox.reach import Reach, blocked

    home = _private(tmp_path)
    box = tmp_path / "box"
    box.mkdir()
    reach = Reach(box, 65534, 65534)
    assert not blocked("/usr/bin", 65534, 65534) and blocked(str(home / "pkg"), 65534, 65534)
    assert reach.source("/usr/bin") == "/usr/bin" and reach.source("/bin/sh") == "/bin/sh"
    point = reach.source(str(home / "pkg" / "data.txt"))
    assert Path(point).parent == box / "reach" and Path(point).is_file()
    folder = reach.source(str(home / "pkg"))
    assert Path(folder).parent == box / "reach" and Path(folder).is_dir()
    assert reach.source(str(home / "pkg")) == folder  # staged once
    assert reach.source("/nonexistent/optional") == "/nonexistent/optional"  # bwrap's -try skips it
    assert reach.binds == [(str(home / "pkg" / "data.txt"), point), (str(home / "pkg"), folder)]
    assert reach.executable(str(home / "pkg" / "bwrap")) == f"{folder}/bwrap"
    again = Reach(box, 65534, 65534)  # a second start in the same sandbox root gets points of its own
    assert again.source(str(home / "pkg")) not in (point, folder)


@pytest.mark.parametrize("code,split", [(0, (0, None)), (1, (1, None)), (128, (128, None)), (137, (None, 9)),
                                        (139, (None, 11)), (192, (None, 64)), (193, (193, None))])
def test_a_shell_exit_status_above_128_is_a_signal(code, split):
    from ptxcore.sandbox.process import split_exit

    assert split_exit(code) == split


def test_a_start_that_fails_leaves_no_descriptor_open(policy, tmp_path, monkeypatch):
    from ptxcore.sandbox.process import SandboxProcess, make_root

    root = make_root("test-fds", os.getuid())
    monkeypatch.setenv("PTXBENCH_BWRAP", str(tmp_path / "no-bwrap"))
    before = len(os.listdir("/proc/self/fd"))
    try:
        with pytest.raises(SandboxUnavailableError, match="PTXBENCH_BWRAP"):
            SandboxProcess.start(policy, root, ["/bin/true"], uid=os.getuid())
    finally:
        shutil.rmtree(root)
    assert len(os.listdir("/proc/self/fd")) == before
