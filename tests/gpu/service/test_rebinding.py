"""The profiling service on loopback is not open to a web page or to another user of the machine.

A page can reach 127.0.0.1 through DNS rebinding (its own domain answered with 127.0.0.1): the request then names
that domain in Host, may carry Origin / Sec-Fetch-Site, and has no token. Each is refused before any route runs,
on every path and method; nothing that changes state runs without the per-start token, loopback included. The
token lies in a 0600 file that the client, the CLI and the worker find for a loopback URL by themselves."""

from __future__ import annotations

import json
import os
import stat

import httpx
import pytest

from ptxcore.gpu.service.client import ProfilerClient, ProfilerRequestError, resolve_token
from ptxcore.gpu.service.security import host_allowed
from ptxcore.gpu.service.server import BackgroundServer
from ptxcore.gpu.service.tokenfile import local_token, token_path

from .conftest import GEMM, fake_config

ROUTES = (("GET", "/health"), ("GET", "/definitions"), ("GET", "/"), ("GET", "/tasks/" + "f" * 32),
          ("POST", "/evaluate"), ("POST", "/batch"), ("POST", "/tasks/batch"), ("POST", "/gpus/0/drain"),
          ("POST", "/gpus/0/resume"))
SUBMIT = {"definition": GEMM, "source": "// ok\n"}


def port_of(url: str) -> int:
    return int(url.rsplit(":", 1)[1])


def test_state_changes_need_the_per_start_token_on_loopback(start_service):
    svc = start_service(gpus=(0,))
    bare = httpx.Client(base_url=svc.url, timeout=30)
    for method, path in ROUTES:
        if method == "POST":
            assert bare.post(path, json=SUBMIT).status_code == 401, path
            assert bare.post(path, json=SUBMIT, headers={"Authorization": "Bearer guessed"}).status_code == 401
    assert svc.gpu(0)["state"] != "drained"  # the drain above did nothing
    assert svc.service.dispatcher.pending_count() == 0 and not list((svc.config.work_dir / "sources").rglob("*.cu"))
    assert bare.get("/health").status_code == 200  # reading needs no token on loopback
    task_id = svc.submit("// ok\n")  # the fixture's client carries this start's token
    assert svc.result(task_id)["state"] == "completed"


@pytest.mark.parametrize("host", ["evil.example", "evil.example:{port}", "127.0.0.1.evil.example:{port}",
                                  "localhost.evil.example", "localhost.", "evil.localhost:{port}"])
def test_a_foreign_host_header_is_refused_on_every_route(start_service, host):
    svc = start_service(gpus=(0,))
    headers = {"Host": host.format(port=port_of(svc.url)), "Authorization": f"Bearer {svc.server.token}"}
    with httpx.Client(base_url=svc.url, timeout=30) as c:
        for method, path in ROUTES:
            r = c.request(method, path, json=SUBMIT if method == "POST" else None, headers=headers)
            assert r.status_code == 400 and "Host header" in r.json()["detail"], (host, path, r.status_code)
    assert svc.gpu(0)["state"] != "drained"


def test_requests_from_web_pages_are_refused(start_service):
    svc = start_service(gpus=(0,))
    auth = {"Authorization": f"Bearer {svc.server.token}"}
    with httpx.Client(base_url=svc.url, timeout=30) as c:
        for extra in ({"Origin": "http://evil.example"}, {"Origin": "null"}, {"Origin": svc.url},
                      {"Sec-Fetch-Site": "cross-site"}, {"Sec-Fetch-Site": "same-origin"}):
            for method, path in ROUTES:
                r = c.request(method, path, json=SUBMIT if method == "POST" else None, headers={**auth, **extra})
                assert r.status_code == 403, (extra, path)
        assert c.get("/health", headers={"Sec-Fetch-Site": "none"}).status_code == 200  # a URL typed by the user


def test_the_names_that_are_accepted(start_service, tmp_path):
    svc = start_service(gpus=(0,), allowed_hosts=["gpu-node-3.example"])
    port = port_of(svc.url)
    with httpx.Client(base_url=svc.url, timeout=30) as c:
        for host in (f"127.0.0.1:{port}", f"localhost:{port}", "localhost", f"gpu-node-3.example:{port}",
                     f"GPU-NODE-3.example:{port}", f"[::1]:{port}", f"10.1.2.3:{port}"):
            assert c.get("/health", headers={"Host": host}).status_code == 200, host
    assert host_allowed("[::1]:80", ()) and not host_allowed("[::1", ()) and not host_allowed("a.b:1:2", ())


def test_the_token_file_is_private_per_start_and_removed_at_exit(tmp_path, profiler_token_dir):
    config = fake_config(tmp_path / "svc", gpus=(0,))
    tokens = []
    for _ in range(2):
        with BackgroundServer(config) as server:
            path = server.token_file
            assert path == token_path(port_of(server.url)) and path.parent == profiler_token_dir
            assert stat.S_IMODE(path.stat().st_mode) == 0o600 and stat.S_IMODE(path.parent.stat().st_mode) == 0o700
            data = json.loads(path.read_text())
            assert data["token"] == server.token and data["pid"] == os.getpid() and data["url"] == server.url
            assert local_token(server.url) == server.token == resolve_token(server.url)
            tokens.append(server.token)
        assert not path.exists()
    assert tokens[0] != tokens[1] and len(tokens[0]) >= 32


def test_the_client_finds_the_token_only_for_its_loopback_service(start_service, monkeypatch):
    svc = start_service(gpus=(0,))
    monkeypatch.delenv("PTXBENCH_PROFILER_TOKEN", raising=False)
    with ProfilerClient(svc.url, timeout_s=60) as client:  # no token given: found in the file
        assert client.evaluate("// ok\n", GEMM).status.value == "PASSED"
    port = port_of(svc.url)
    seen = []

    def record(request: httpx.Request) -> httpx.Response:
        seen.append(request.headers.get("authorization"))
        return httpx.Response(200, json={"status": "ok"})

    for url in (f"http://gpu-node-3.example:{port}", f"http://10.1.2.3:{port}"):  # same port, not this host
        with ProfilerClient(url, transport=httpx.MockTransport(record)) as remote:
            remote.health()
    assert seen == [None, None]
    with ProfilerClient(svc.url, token="wrong") as wrong, pytest.raises(ProfilerRequestError, match="401"):
        wrong.submit("// ok\n", GEMM)


def test_a_token_file_that_others_can_read_or_of_a_dead_service_is_not_used(tmp_path, profiler_token_dir):
    path = token_path(65000)
    path.write_text(json.dumps({"url": "http://127.0.0.1:65000", "pid": os.getpid(), "token": "t" * 40}))
    path.chmod(0o644)
    assert local_token("http://127.0.0.1:65000") is None
    path.chmod(0o600)
    assert local_token("http://127.0.0.1:65000") == "t" * 40
    path.write_text(json.dumps({"url": "http://127.0.0.1:65000", "pid": 2 ** 22 + 12345, "token": "t" * 40}))
    assert local_token("http://127.0.0.1:65000") is None
    path.unlink()


def test_eval_server_health_and_the_prefect_worker_path_carry_the_token(start_service, monkeypatch, tmp_path):
    """Every caller of the service finds this start's token for a loopback URL: `ptxbench eval --server`,
    `ptxbench profiler health`, and the judge backend a `ptxbench worker` judges with."""
    from typer.testing import CliRunner

    from flows.cli.main import app
    from ptxcore.arch import get_architecture
    from ptxcore.judge.route import WORKER_JUDGE_ENV
    from ptxcore.problems import get_problem
    from tasks.remote_judge import worker_backend

    svc = start_service(gpus=(0,))
    monkeypatch.delenv("PTXBENCH_PROFILER_TOKEN", raising=False)
    kernel = tmp_path / "k.cu"
    kernel.write_text("// ok\n")
    r = CliRunner().invoke(app, ["eval", str(kernel), "-p", GEMM, "--server", svc.url, "--json"])
    assert r.exit_code == 0 and json.loads(r.stdout)["status"] == "PASSED", r.output
    r = CliRunner().invoke(app, ["profiler", "health", "--server", svc.url, "--json"])
    assert r.exit_code == 0 and json.loads(r.stdout)["status"] == "ok", r.output
    monkeypatch.setenv(WORKER_JUDGE_ENV, svc.url)
    verdict = worker_backend("hopper").judge("// ok\n", get_problem(GEMM), get_architecture("hopper"))
    assert verdict.status.value == "PASSED"
    done = svc.health()["gpus"][0]["tasks_scored"]
    assert done >= 2  # both submissions were accepted (POST with the token), not refused
