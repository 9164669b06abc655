"""Task state survives a crash of the service process (SIGKILL, no shutdown): finished tasks keep their
results, tasks that were running are `lost` (never re-run, never re-scored), pending ones run once."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx

from ptxcore.gpu.service.client import ProfilerClient
from ptxcore.gpu.service.tokenfile import local_token

from .conftest import GEMM, wait_for

REPO = Path(__file__).resolve().parents[3]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _start(work_dir: Path, port: int) -> subprocess.Popen:
    args = json.dumps({"eval_s": 0.05, "state_build_s": 0.05})
    proc = subprocess.Popen(
        [sys.executable, "-m", "ptxcore.gpu.service", "--gpus", "0", "--port", str(port), "--fake",
         "--work-dir", str(work_dir), "--runner-args", args, "--timeout-s", "60", "--log-level", "warning"],
        cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"

    def up() -> bool:
        try:
            return httpx.get(f"{url}/health", timeout=2).json()["status"] == "ok"
        except (httpx.HTTPError, ValueError):
            return False

    wait_for(up, 60, "service up")
    return proc


def _http(url: str) -> httpx.Client:
    """A raw client with this start's token (every start of the service makes a new one)."""
    return httpx.Client(base_url=url, timeout=60, headers={"Authorization": f"Bearer {local_token(url)}"})


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    with open(f"/proc/{pid}/stat") as f:
        return f.read().split()[2] == "Z"


def test_results_lost_and_pending_tasks_across_a_crash(tmp_path):
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    first = _start(tmp_path, port)
    try:
        http = _http(url)
        post = lambda src: http.post("/evaluate", json={"definition": GEMM, "source": src}).json()["task_id"]  # noqa: E731
        done = post("// quick FAKE:wrong\n")
        assert http.get(f"/tasks/{done}", params={"wait_s": 30}).json()["state"] == "completed"
        running = post("// FAKE:sleep=60\n")
        wait_for(lambda: http.get(f"/tasks/{running}").json()["state"] == "running", 20, "running")
        pending = post("// queued behind it\n")
        worker = http.get("/health").json()["gpus"][0]["worker_pid"]
        assert http.get(f"/tasks/{pending}").json()["state"] == "pending"
    finally:
        first.send_signal(signal.SIGKILL)
        first.wait(30)
    wait_for(lambda: _gone(worker), 20, "worker died with its service")
    second = _start(tmp_path, port)
    try:
        http = _http(url)
        done_view = http.get(f"/tasks/{done}").json()
        assert done_view["state"] == "completed" and done_view["result"]["status"] == "INCORRECT_NUMERICAL"
        lost = http.get(f"/tasks/{running}", params={"wait_s": 5}).json()
        assert lost["state"] == "lost" and "resubmit" in lost["error"] and lost["result"] is None
        ran = http.get(f"/tasks/{pending}", params={"wait_s": 30}).json()
        assert ran["state"] == "completed" and ran["result"]["status"] == "PASSED"
        assert [a["disposition"] for a in ran["attempts"]] == ["scored"]
        wait_for(lambda: (h := http.get("/health").json())["pending"] == 0 and h["running"] == 0, 20, "an idle service")
        assert http.get(f"/tasks/{running}").json()["state"] == "lost", "a lost task is never re-run"
    finally:
        second.send_signal(signal.SIGINT)
        second.wait(60)


def test_client_rides_through_a_restart_and_resubmits_a_lost_task(tmp_path):
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    first = _start(tmp_path, port)
    client = ProfilerClient(url, timeout_s=120, retries=4, backoff_s=0.5, poll_wait_s=2)
    outcome: dict = {}

    def judge() -> None:
        try:
            outcome["result"] = client.evaluate("// FAKE:sleep=3\n", GEMM)
        except Exception as exc:  # noqa: BLE001 - recorded for the assertion
            outcome["error"] = exc

    thread = threading.Thread(target=judge)
    thread.start()
    http = httpx.Client(base_url=url, timeout=30)
    wait_for(lambda: http.get("/health").json()["running"] == 1, 20, "task running")
    first.send_signal(signal.SIGKILL)
    first.wait(30)
    time.sleep(1.0)  # the client's polls fail meanwhile (connection refused) and are repeated
    second = _start(tmp_path, port)
    try:
        thread.join(90)
        assert "error" not in outcome, outcome.get("error")
        assert outcome["result"].status.value == "PASSED"
        states = [t["state"] for t in _all_tasks(tmp_path)]
        assert sorted(states) == ["completed", "lost"], "the lost task was resubmitted once, not re-run"
    finally:
        second.send_signal(signal.SIGINT)
        second.wait(60)


def _all_tasks(work_dir: Path) -> list[dict]:
    import sqlite3

    db = sqlite3.connect(work_dir / "tasks.sqlite3")
    return [{"state": r[0]} for r in db.execute("SELECT state FROM tasks")]
