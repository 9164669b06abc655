"""HTTP requests are untrusted input: invalid numbers and strings are 422 (never 500), /batch is all or
nothing, and a service with no usable GPU refuses work (503) instead of queueing tasks that stay pending.
Against a real uvicorn with FakeEngine workers."""

from __future__ import annotations

import json

import pytest

from ptxcore.gpu.service.models import BatchPollRequest, SubmitRequest

from .conftest import GEMM, MHA, wait_for

LONE_SURROGATE = '"// \\ud800 kernel\\n"'  # JSON text: a lone surrogate escape, legal JSON, not encodable text


def raw_post(svc, path: str, body: str):
    return svc.http.post(path, content=body.encode(), headers={"content-type": "application/json"})


def body(fields: str, definition: str = f'"{GEMM}"', source: str = '"x"') -> str:
    """A request body as raw JSON text (NaN, Infinity and escapes exactly as a hostile client writes them)."""
    return '{"definition": ' + definition + ', "source": ' + source + (", " + fields if fields else "") + "}"


BAD_BODIES = [
    (body('"timeout_s": NaN'), "timeout_s"),
    (body('"timeout_s": Infinity'), "timeout_s"),
    (body('"timeout_s": -Infinity'), "timeout_s"),
    (body('"timeout_s": -5'), "timeout_s"),
    (body('"timeout_s": 0'), "timeout_s"),
    (body('"timeout_s": 1e400'), "timeout_s"),
    (body("", source=LONE_SURROGATE), "source"),
    (body("", source='"a\\u0000b"'), "source"),
    (body('"client_tag": "a\\ud800"'), "client_tag"),
    (body('"client_tag": "line\\nbreak"'), "client_tag"),
    (body('"client_tag": "' + "t" * 201 + '"'), "client_tag"),
    (body("", definition='"\\ud800"'), "definition"),
    (body('"arch": "hop\\u0000per"'), "arch"),
]


def test_invalid_numbers_and_strings_are_422_and_queue_nothing(start_service):
    svc = start_service(gpus=(0,))  # one service for every case: each starts worker processes
    before = svc.service.store.counts()
    for text, field in BAD_BODIES:
        r = raw_post(svc, "/evaluate", text)
        assert r.status_code == 422, (text[:120], r.status_code, r.text)
        detail = r.json()["detail"]
        assert any(field in ".".join(map(str, d["loc"])) for d in detail), (text[:120], detail)
        assert all("input" not in d for d in detail)  # the offending value is never echoed back
        assert raw_post(svc, "/batch", '{"items": [' + text + "]}").status_code == 422, text[:120]
    assert svc.service.store.counts() == before


def test_a_solution_with_bad_strings_is_422(start_service):
    svc = start_service(gpus=(0,))
    solution = {"name": "s", "definition": GEMM, "author": "a\\ud800",
                "spec": {"language": "cuda", "target_hardware": ["H200"], "entry_point": "k.cu::run"},
                "sources": [{"path": "k.cu", "content": "// ok"}]}
    body = json.dumps({"definition": GEMM, "solution": solution}).replace("a\\\\ud800", "a\\ud800")
    r = raw_post(svc, "/evaluate", body)
    assert r.status_code == 422, r.text


def test_long_poll_numbers_are_422(start_service):
    svc = start_service(gpus=(0,))
    task_id = svc.submit("// ok\n")
    for value in ("nan", "inf", "-1"):
        assert svc.http.get(f"/tasks/{task_id}", params={"wait_s": value}).status_code == 422
        assert svc.http.get(f"/tasks/{task_id}", params={"timeout": value}).status_code == 422
    assert raw_post(svc, "/tasks/batch", '{"task_ids": ["' + task_id + '"], "wait_s": NaN}').status_code == 422


def test_drain_reason_with_a_lone_surrogate_cannot_break_health(start_service):
    svc = start_service(gpus=(0,))
    assert raw_post(svc, "/gpus/0/drain", '{"reason": "x\\ud800"}').status_code == 422
    assert svc.http.get("/health").status_code == 200 and svc.gpu(0)["state"] == "idle"


def test_batch_with_one_oversize_item_queues_nothing(start_service):
    svc = start_service(gpus=(0,), max_source_bytes=1024)
    before = svc.service.store.counts()
    items = [{"definition": GEMM, "source": "// a\n"}, {"definition": MHA, "source": "x" * 2048}]
    r = svc.http.post("/batch", json={"items": items})
    assert r.status_code == 413 and "item 1" in r.json()["detail"], r.text
    assert svc.service.store.counts() == before and svc.health()["pending"] == 0


@pytest.mark.parametrize(("bad", "status"), [
    ({"definition": GEMM, "source": "x", "timeout_s": 1e6}, 400),  # over the server's max_timeout_s
    ({"definition": GEMM, "source": "x", "arch": "blackwell"}, 400),
    ({"definition": GEMM, "source": "x", "workload_uuid": "nope"}, 404),
    ({"definition": GEMM, "source": "x", "timeout_s": float("nan")}, 422),
])
def test_batch_with_one_bad_item_queues_nothing(start_service, bad, status):
    svc = start_service(gpus=(0,))
    before = svc.service.store.counts()
    items = [{"definition": GEMM, "source": "// a\n"}, bad]
    body = json.dumps({"items": items})  # json.dumps writes NaN for the float: legal for Python, not for JSON
    r = raw_post(svc, "/batch", body)
    assert r.status_code == status, r.text
    assert svc.service.store.counts() == before


def test_batch_that_would_overflow_the_queue_queues_nothing(start_service):
    svc = start_service(gpus=(0,), max_pending=2, runner_args={"eval_s": 5.0})
    svc.submit("// running\n")
    wait_for(lambda: svc.health()["running"] == 1, 20, "first task running")
    before = svc.service.store.counts()
    r = svc.http.post("/batch", json={"items": [{"definition": GEMM, "source": f"// {i}\n"} for i in range(3)]})
    assert r.status_code == 503 and "queue" in r.json()["detail"]
    assert svc.service.store.counts() == before


def test_no_usable_gpu_is_503_and_nothing_is_queued(start_service):
    svc = start_service(gpus=(0,))
    assert svc.http.post("/gpus/0/drain", json={"reason": "maintenance"}).status_code == 200
    wait_for(lambda: svc.gpu(0)["state"] == "drained", 20, "drained")
    before = svc.service.store.counts()
    r = svc.http.post("/evaluate", json={"definition": GEMM, "source": "// k\n"})
    assert r.status_code == 503 and "no usable GPU" in r.json()["detail"] and "maintenance" in r.json()["detail"]
    assert r.headers.get("retry-after")
    r = svc.http.post("/batch", json={"items": [{"definition": GEMM, "source": "// k\n"}]})
    assert r.status_code == 503
    assert svc.service.store.counts() == before and svc.health()["pending"] == 0
    svc.http.post("/gpus/0/resume")
    wait_for(lambda: svc.gpu(0)["state"] == "idle", 20, "resumed")
    assert svc.result(svc.submit("// k\n"))["state"] == "completed"


def test_an_overheated_only_gpu_refuses_work(start_service):
    from .conftest import set_gpu

    svc = start_service(gpus=(0, 1))
    set_gpu(svc.config, 0, temperature_c=95)
    wait_for(lambda: svc.gpu(0)["state"] == "drained", 20, "gpu 0 drained")
    assert svc.http.post("/evaluate", json={"definition": GEMM, "source": "// k\n"}).status_code == 202  # gpu 1 serves
    set_gpu(svc.config, 1, temperature_c=95)
    wait_for(lambda: svc.gpu(1)["state"] == "drained", 20, "gpu 1 drained")
    r = svc.http.post("/evaluate", json={"definition": GEMM, "source": "// k\n"})
    assert r.status_code == 503 and "GPU 1 drained (temperature 95 C" in r.json()["detail"]


def test_models_refuse_non_finite_numbers_without_a_server():
    with pytest.raises(ValueError, match="finite"):
        SubmitRequest(definition=GEMM, source="x", timeout_s=float("nan"))
    with pytest.raises(ValueError, match="finite"):
        BatchPollRequest(task_ids=["a" * 32], wait_s=float("inf"))
    with pytest.raises(ValueError, match="unicode string|surrogate"):
        SubmitRequest(definition=GEMM, source="\ud800")
