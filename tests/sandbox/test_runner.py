"""The sandbox itself, attacked from inside: network, files, environment, survivors, limits."""

from __future__ import annotations

import os
import random
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
    time.sleep(0.2)
    assert processes_matching(marker) == []


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
    time.sleep(0.2)
    assert processes_matching(marker) == []


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
    from ptxcore.sandbox import RunAs

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
    gpu = presets.gpu_stage_policy("gpu-tool", tool_paths=[root], run_as=RunAs.CALLER)
    out = run(["faketool"], gpu, 30)
    assert out.ok and out.stdout == "sections beside the launcher\n", out.stderr[-500:]
    assert not sh(f"cat {bindir / 'secret'}", gpu).ok
