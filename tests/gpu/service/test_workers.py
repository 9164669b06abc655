"""Workers that hang or die: reported, replaced, blamed on the right party (FakeRunner in real
worker processes)."""

from __future__ import annotations

import os
import signal
from pathlib import Path

from .conftest import wait_for


def test_candidate_hang_is_timeout_and_the_worker_is_replaced(start_service):
    svc = start_service(gpus=(0,), default_timeout_s=1.5)
    pid = svc.gpu(0)["worker_pid"]
    view = svc.result(svc.submit("// FAKE:hang\n"))
    assert view["state"] == "completed" and view["result"]["status"] == "TIMEOUT"
    assert "1.5 s" in view["result"]["reason"]
    gpu = svc.gpu(0)
    assert gpu["restarts"] == 1 and gpu["worker_pid"] not in (None, pid) and gpu["state"] == "idle"
    _assert_gone(pid)
    after = svc.result(svc.submit("// fine afterwards\n"))
    assert after["result"]["status"] == "PASSED"


def test_candidate_crashes_are_runtime_errors(start_service):
    svc = start_service(gpus=(0,))
    segv = svc.result(svc.submit("// FAKE:segv\n"))
    exit_ = svc.result(svc.submit("// FAKE:exit\n"))
    assert segv["result"]["status"] == "RUNTIME_ERROR" and "SIGSEGV" in segv["result"]["reason"]
    assert exit_["result"]["status"] == "RUNTIME_ERROR"
    assert svc.gpu(0)["restarts"] == 2
    assert svc.result(svc.submit("// ok\n"))["result"]["status"] == "PASSED"


def test_harness_failures_are_excluded_retried_elsewhere_then_failed_never_scored(start_service):
    svc = start_service(gpus=(0, 1), default_timeout_s=1.5, max_attempts=2)
    view = svc.result(svc.submit("// FAKE:harness-hang\n"), wait_s=60)
    assert view["state"] == "failed" and view["result"]["status"] == "INFRA_ERROR"
    assert [a["disposition"] for a in view["attempts"]] == ["excluded", "excluded"]
    assert {a["gpu"] for a in view["attempts"]} == {0, 1}, "the retry must go to the other GPU"
    assert "not charged to the candidate" in view["error"]
    raised = svc.result(svc.submit("// FAKE:raise\n"), wait_s=60)
    assert raised["state"] == "failed" and "fake runner failure" in raised["error"]
    infra = svc.result(svc.submit("// FAKE:infra\n"), wait_s=60)
    assert infra["state"] == "failed" and len(infra["attempts"]) == 2
    wait_for(lambda: svc.health()["status"] == "ok", 30, "both GPUs serving again")


def test_killing_a_worker_mid_task_reports_it_and_replaces_the_worker(start_service):
    svc = start_service(gpus=(0, 1), runner_args={"eval_s": 2.0})
    task_id = svc.submit("// slow but fine\n")
    wait_for(lambda: any(g["current_task"] == task_id for g in svc.health()["gpus"]), 20, "task running")
    victim = next(g for g in svc.health()["gpus"] if g["current_task"] == task_id)
    phase = Path(svc.config.runner_args["control_dir"]) / f"gpu{victim['gpu']}.phase"
    wait_for(lambda: phase.is_file() and phase.read_text() == "candidate", 20, "the candidate's run")
    os.kill(victim["worker_pid"], signal.SIGKILL)  # as the OOM killer would
    view = svc.result(task_id, wait_s=60)
    assert view["state"] == "completed" and view["result"]["status"] == "PASSED"
    first, second = view["attempts"]
    assert first["disposition"] == "excluded" and "SIGKILL" in first["reason"] and first["gpu"] == victim["gpu"]
    assert "in candidate code" in first["reason"]  # killed inside the candidate's run, still not charged to it
    assert second["disposition"] == "scored" and second["gpu"] != victim["gpu"]
    replaced = svc.gpu(victim["gpu"])
    assert replaced["restarts"] == 1 and replaced["worker_pid"] != victim["worker_pid"]
    wait_for(lambda: svc.gpu(victim["gpu"])["state"] == "idle", 20, "replacement idle")
    _assert_gone(victim["worker_pid"])


def _assert_gone(pid: int) -> None:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return
    with open(f"/proc/{pid}/stat") as f:  # a zombie awaiting reaping is gone too
        assert f.read().split()[2] == "Z", f"worker {pid} still running"
