"""The temporary Prefect server that `ptxbench campaign run` starts never outlives the campaign process,
however it ends: SIGKILL, SIGTERM or SIGINT. A real campaign runs in a subprocess with no PREFECT_API_URL;
once its server answers, the campaign (only the campaign, not its process group) gets the signal; then no
server process may remain and its port must be free."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from tests.waiting import wait_for

from .conftest import write_config

CLI = "from flows.cli.main import app; app()"
SERVER_APP = "prefect.server.api.server:create_app"


def children(pid: int) -> list[int]:
    out: list[int] = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            out += [int(c) for c in (task / "children").read_text().split()]
        except OSError:
            pass
    return out


def cmdline(pid: int) -> list[str]:
    try:
        return Path(f"/proc/{pid}/cmdline").read_text().split("\0")
    except OSError:
        return []


def alive(pid: int) -> bool:
    """Running (a zombie waiting for its new parent to reap it counts as gone)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def port_free(port: int) -> bool:
    """Nothing listens on the port (SO_REUSEADDR: closed connections in TIME_WAIT do not count)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
            sock.listen(1)
        except OSError:
            return False
    return True


def wait_for_server(proc: subprocess.Popen, timeout_s: float) -> tuple[int, int]:
    """(pid, port) of the campaign's server once its health endpoint answers."""
    found: list[tuple[int, int]] = []

    def answering() -> bool:
        assert proc.poll() is None, f"the campaign exited early: {proc.stderr.read()[-2000:]}"
        for child in children(proc.pid):
            args = cmdline(child)
            if SERVER_APP in args:
                port = int(args[args.index("--port") + 1])
                try:
                    if httpx.get(f"http://127.0.0.1:{port}/api/health", timeout=2).status_code == 200:
                        found.append((child, port))
                        return True
                except httpx.HTTPError:
                    pass
        return False

    wait_for(answering, timeout_s, "the campaign's temporary Prefect server to answer", interval_s=0.5)
    return found[0]


def flow_running(port: int) -> bool:
    """The campaign's flow run is RUNNING on its server: the campaign is busy, past its start-up."""
    try:
        r = httpx.post(f"http://127.0.0.1:{port}/api/flow_runs/filter", timeout=5,
                       json={"flow_runs": {"state": {"type": {"any_": ["RUNNING"]}}}, "limit": 1})
    except httpx.HTTPError:
        return False
    return r.status_code == 200 and bool(r.json())


@pytest.mark.slow
@pytest.mark.timeout(600)  # its own waits: 300 s for the server, 120 s for the exit
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM, signal.SIGINT], ids=lambda s: s.name)
def test_the_temporary_server_dies_with_the_campaign(sig, tmp_path, repo_root, compile_cache_dir):
    cfg = write_config(tmp_path / "srv.yaml", "srv", turns=3, problems="[gemm_n7168_k5120]")
    env = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}
    env.update(PREFECT_HOME=str(tmp_path / "prefect-home"), PTXBENCH_MLRUNS=str(tmp_path / "mlruns"),
               PTXBENCH_CACHE_DIR=str(compile_cache_dir), FAKE_JUDGE_DELAY_S="600", PYTHONPATH=str(repo_root))
    cmd = [sys.executable, "-c", CLI, "campaign", "run", str(cfg), "--warehouse", str(tmp_path / "wh.duckdb"),
           "--judge-plugin", "tests.flows.fakes:fake_judge"]
    proc = subprocess.Popen(cmd, cwd=repo_root, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    server = port = None
    try:
        server, port = wait_for_server(proc, timeout_s=300)
        wait_for(lambda: flow_running(port), 120, "the campaign's flow run to be RUNNING", interval_s=0.2)
        os.kill(proc.pid, sig)
        proc.wait(timeout=120)  # the exit watchdog (flows.runtime) ends it 20 s after the signal at the latest
        wait_for(lambda: not alive(server), 20, f"the Prefect server (pid {server}) to die with the campaign "
                 f"({sig.name})", interval_s=0.2)
        # the kernel releases a dead listener's socket a moment later
        wait_for(lambda: port_free(port), 10, f"port {port} to be free after {sig.name}", interval_s=0.2)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        if server is not None and alive(server) and SERVER_APP in cmdline(server):
            os.kill(server, signal.SIGKILL)  # clean up what a failed run left behind (our own child)
