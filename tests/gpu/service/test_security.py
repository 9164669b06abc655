"""Security: loopback by default, a token for anything else, size limits, no path from a request."""

from __future__ import annotations

import os
from pathlib import Path

import httpx
import pytest

from ptxcore.gpu.service import InsecureBindError, ServiceConfig, check_bind
from ptxcore.gpu.service.server import BackgroundServer

from .conftest import GEMM, fake_config

TOKEN = "s3cret-token-0123456789"


def test_non_loopback_bind_requires_a_token(tmp_path):
    for host in ("0.0.0.0", "10.1.2.3", "::", "example.org"):
        with pytest.raises(InsecureBindError):
            check_bind(ServiceConfig(work_dir=tmp_path, gpus=[0], host=host))
        check_bind(ServiceConfig(work_dir=tmp_path, gpus=[0], host=host, token=TOKEN))
    for host in ("127.0.0.1", "127.0.0.5", "::1", "localhost"):
        check_bind(ServiceConfig(work_dir=tmp_path, gpus=[0], host=host))
    with pytest.raises(InsecureBindError):
        check_bind(ServiceConfig(work_dir=tmp_path, gpus=[0], token="short"))
    with pytest.raises(InsecureBindError):  # refused before anything listens
        BackgroundServer(fake_config(tmp_path, host="0.0.0.0"))


def test_token_is_enforced_on_every_endpoint(start_service):
    svc = start_service(gpus=(0,), token=TOKEN)
    bare = httpx.Client(base_url=svc.url, timeout=30)
    for method, path in (("GET", "/health"), ("GET", "/definitions"), ("GET", "/"), ("POST", "/evaluate"),
                         ("GET", "/tasks/" + "f" * 32), ("POST", "/gpus/0/drain")):
        assert bare.request(method, path, json={}).status_code == 401, path
        wrong = bare.request(method, path, json={}, headers={"Authorization": "Bearer " + TOKEN[:-1] + "x"})
        assert wrong.status_code == 401
    assert bare.get("/health", headers={"Authorization": TOKEN}).status_code == 401  # scheme required
    assert svc.http.get("/health").status_code == 200
    task_id = svc.submit("// ok\n")
    assert svc.result(task_id)["state"] == "completed"


def test_request_size_limits(start_service):
    svc = start_service(gpus=(0,), max_request_bytes=64 << 10, max_source_bytes=16 << 10, max_batch=3)
    big_body = {"definition": GEMM, "source": "x" * (80 << 10)}
    assert svc.http.post("/evaluate", json=big_body).status_code == 413

    def chunks():  # no Content-Length: the limit still holds
        yield b'{"definition": "gemm_n7168_k5120", "source": "'
        for _ in range(100):
            yield b"y" * 1024
        yield b'"}'

    r = svc.http.post("/evaluate", content=chunks(), headers={"content-type": "application/json"})
    assert r.status_code == 413
    too_long_source = {"definition": GEMM, "source": "z" * (20 << 10)}
    r = svc.http.post("/evaluate", json=too_long_source)
    assert r.status_code == 413 and "source" in r.json()["detail"]
    items = [{"definition": GEMM, "source": f"// {i}\n"} for i in range(4)]
    assert svc.http.post("/batch", json={"items": items}).status_code == 413
    assert svc.http.post("/tasks/batch", json={"task_ids": ["f" * 32] * 4}).status_code == 413
    assert svc.http.post("/evaluate", json={"definition": GEMM, "source": "// fine\n"}).status_code == 202


def _tree(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*")}


def test_no_request_field_reaches_outside_the_work_dir(tmp_path, start_service):
    outside = tmp_path / "outside"
    outside.mkdir()
    svc = start_service(gpus=(0,), work_dir=tmp_path / "svc")
    sibling_before = set(os.listdir(tmp_path))
    solution = {"name": "s", "definition": GEMM, "author": "x",
                "spec": {"language": "cuda", "target_hardware": ["H100"], "entry_point": "k.cu::run"},
                "sources": [{"path": "../../outside/pwned.cu", "content": "// evil\n"}]}
    attempts = [
        ("POST", "/evaluate", {"definition": "../../outside/x", "source": "x"}),
        ("POST", "/evaluate", {"definition": "/etc/passwd", "source": "x"}),
        ("POST", "/evaluate", {"definition": GEMM, "source": "x", "workload_uuid": "../../outside"}),
        ("POST", "/evaluate", {"definition": GEMM, "source": "x", "arch": "../../outside"}),
        ("POST", "/evaluate", {"definition": GEMM, "solution": solution}),
        ("POST", "/evaluate", {"definition": GEMM, "source": "x", "work_dir": str(outside)}),
        ("GET", "/tasks/..%2F..%2Foutside", None),
        ("GET", "/definitions/..%2F..%2Fetc%2Fpasswd", None),
    ]
    for method, path, body in attempts:
        r = svc.http.request(method, path, json=body)
        assert r.status_code in (400, 404, 422), (path, body, r.status_code)
    assert _tree(outside) == set() and set(os.listdir(tmp_path)) == sibling_before
    # a well-formed solution is accepted; its file name is not used as a path: sources are stored by hash
    solution["sources"][0]["path"] = "kernel.cu"
    task_id = svc.http.post("/evaluate", json={"definition": GEMM, "solution": solution}).json()["task_id"]
    assert svc.result(task_id)["state"] == "completed"
    stored = [p for p in (tmp_path / "svc" / "sources").rglob("*.cu")]
    assert len(stored) == 1 and stored[0].name != "kernel.cu" and len(stored[0].stem) == 64
