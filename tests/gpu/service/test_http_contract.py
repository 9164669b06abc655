"""The HTTP contract, against a real uvicorn on 127.0.0.1 with FakeRunner workers."""

from __future__ import annotations

import time

from ptxcore.problems import get_problem
from ptxcore.schema import JudgeResult

from .conftest import GEMM, MHA


def test_root_health_and_definitions(start_service):
    svc = start_service()
    root = svc.http.get("/").json()
    for endpoint in ("POST /evaluate", "POST /sanitize", "POST /profile", "GET /health", "GET /definitions",
                     "GET /tasks/{task_id}", "POST /tasks/batch", "POST /batch"):
        assert endpoint in root["endpoints"]
    health = svc.health()
    assert health["status"] == "ok" and [g["gpu"] for g in health["gpus"]] == [0, 1]
    assert all(g["state"] == "idle" and g["condition"] == "healthy" and g["worker_pid"] for g in health["gpus"])
    assert health["queue_size"] == 0
    names = {d["name"] for d in svc.http.get("/definitions").json()}
    assert {GEMM, MHA, "mha_bwd_d128_causal"} <= names
    assert svc.http.get(f"/definitions/{GEMM}").json()["name"] == GEMM
    workloads = svc.http.get(f"/definitions/{GEMM}/workloads").json()
    assert workloads[0]["uuid"] == get_problem(GEMM).primary_workload.uuid
    assert svc.http.get("/definitions/nope").status_code == 404


def test_evaluate_long_poll_returns_a_judge_result(start_service):
    svc = start_service()
    task_id = svc.submit("// ok kernel\n", client_tag="c/t/0")
    first = svc.http.get(f"/tasks/{task_id}").json()
    assert first["state"] in ("pending", "running", "completed")
    t0 = time.monotonic()
    view = svc.result(task_id, wait_s=30)
    assert time.monotonic() - t0 < 10, "the long-poll must return as soon as the task is done"
    assert view["state"] == "completed" and view["kind"] == "evaluate" and view["client_tag"] == "c/t/0"
    result = JudgeResult.model_validate(view["result"])
    assert result.status.value == "PASSED" and result.definition == GEMM and result.arch == "hopper"
    assert result.workload_uuid == get_problem(GEMM).primary_workload.uuid
    assert view["gpu"] in (0, 1) and [a["disposition"] for a in view["attempts"]] == ["scored"]
    assert view["service_s"] > 0 and view["queue_s"] >= 0


def test_wrong_verdicts_come_back_unchanged_and_kinds_are_recorded(start_service):
    svc = start_service()
    wrong = svc.submit("// FAKE:wrong\n")
    sanitize = svc.submit("// ok\n", kind="sanitize")
    profile = svc.submit("// ok\n", kind="profile", definition=MHA)
    views = svc.http.post("/tasks/batch", json={"task_ids": [wrong, sanitize, profile], "wait_s": 30},
                          timeout=60).json()
    assert [v["task_id"] for v in views] == [wrong, sanitize, profile]
    assert views[0]["result"]["status"] == "INCORRECT_NUMERICAL" and views[0]["state"] == "completed"
    assert (views[1]["kind"], views[2]["kind"]) == ("sanitize", "profile")
    assert views[2]["definition"] == MHA


def test_long_poll_times_out_on_a_running_task(start_service):
    svc = start_service(runner_args={"eval_s": 3.0})
    task_id = svc.submit("// slow\n")
    t0 = time.monotonic()
    view = svc.result(task_id, wait_s=0.5)
    assert 0.4 < time.monotonic() - t0 < 3.0 and view["state"] in ("pending", "running")
    fib_alias = svc.http.get(f"/tasks/{task_id}", params={"timeout": 10}, timeout=30).json()  # FIBServe's name
    assert fib_alias["state"] == "completed"


def test_batch_submit_is_all_or_nothing(start_service):
    svc = start_service()
    items = [{"definition": GEMM, "source": "// a\n"}, {"definition": MHA, "source": "// b\n", "kind": "sanitize"}]
    r = svc.http.post("/batch", json={"items": items})
    assert r.status_code == 202
    ids = [t["task_id"] for t in r.json()["tasks"]]
    views = svc.http.post("/tasks/batch", json={"task_ids": ids, "wait_s": 30}, timeout=60).json()
    assert [v["state"] for v in views] == ["completed", "completed"] and views[1]["kind"] == "sanitize"
    before = svc.service.store.counts()
    bad = svc.http.post("/batch", json={"items": items + [{"definition": "nope", "source": "x"}]})
    assert bad.status_code == 404 and svc.service.store.counts() == before


def test_request_errors(start_service):
    svc = start_service()
    post = svc.http.post
    assert post("/evaluate", json={"definition": "nope", "source": "x"}).status_code == 404
    assert post("/evaluate", json={"definition": GEMM, "source": "x", "workload_uuid": "nope"}).status_code == 404
    r = post("/evaluate", json={"definition": GEMM, "source": "x", "arch": "blackwell"})
    assert r.status_code == 400 and "hopper only" in r.json()["detail"]
    assert post("/evaluate", json={"definition": GEMM, "source": "x", "arch": "pascal"}).status_code == 400
    assert post("/evaluate", json={"definition": GEMM}).status_code == 422
    assert post("/evaluate", json={"definition": GEMM, "source": "x", "extra": 1}).status_code == 422
    assert post("/evaluate", json={"definition": GEMM, "source": "x", "timeout_s": 1e9}).status_code == 400
    assert svc.http.get("/tasks/" + "f" * 32).status_code == 404
    assert svc.http.get("/tasks/not-a-task-id").status_code == 422
    assert post("/tasks/batch", json={"task_ids": ["x" * 32]}).status_code == 400
    assert post("/gpus/7/drain", json={}).status_code == 404


def test_arch_aliases_resolve(start_service):
    svc = start_service(gpus=(0,))
    view = svc.result(svc.submit("// ok\n", arch="h100"))
    assert view["arch"] == "hopper" and view["result"]["arch"] == "hopper"
