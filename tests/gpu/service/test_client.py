"""ProfilerClient: verdicts returned as they are; retries only for infrastructure failures."""

from __future__ import annotations

import httpx
import pytest

from ptxcore.gpu.service.client import ProfilerClient, ProfilerRequestError, ProfilerUnavailable
from ptxcore.gpu.service.models import TaskKind, WorkItem
from ptxcore.schema import EvaluationStatus

from .conftest import GEMM
from .results import scripted_result

ITEM = WorkItem(task_id="a" * 32, kind=TaskKind.EVALUATE, definition=GEMM, arch="hopper", source="x",
                source_sha256="0" * 64, timeout_s=5)


class FakeServer:
    """A scripted /evaluate + /tasks server: `script` lists what each submitted task turns into."""

    def __init__(self, script: list) -> None:
        self.script, self.submits, self.polls = list(script), 0, 0

    def __call__(self, request: httpx.Request) -> httpx.Response:
        if request.method == "POST" and request.url.path == "/evaluate":
            self.submits += 1
            step = self.script.pop(0)
            if isinstance(step, int):
                return httpx.Response(step, json={"detail": f"scripted {step}"})
            if step == "refused":
                raise httpx.ConnectError("connection refused")
            self._next = step
            return httpx.Response(202, json={"task_id": f"{self.submits:032x}", "state": "pending"})
        self.polls += 1
        state, status = self._next
        result = scripted_result(ITEM, status, "scripted").model_dump(mode="json") if status else None
        tid = request.url.path.rsplit("/", 1)[-1]
        return httpx.Response(200, json={"task_id": tid, "state": state, "result": result, "error": "x"})


def client(server: FakeServer, retries: int = 3) -> ProfilerClient:
    return ProfilerClient("http://profiler", retries=retries, backoff_s=0.001, transport=httpx.MockTransport(server))


@pytest.mark.parametrize("status", [EvaluationStatus.PASSED, EvaluationStatus.INCORRECT_NUMERICAL,
                                    EvaluationStatus.RUNTIME_ERROR, EvaluationStatus.TIMEOUT,
                                    EvaluationStatus.COMPILE_ERROR, EvaluationStatus.REWARD_HACK])
def test_a_verdict_is_never_retried(status):
    server = FakeServer([("completed", status)])
    assert client(server).evaluate("src", GEMM).status is status
    assert server.submits == 1


def test_infrastructure_failures_are_retried():
    server = FakeServer([503, "refused", ("failed", EvaluationStatus.INFRA_ERROR), ("lost", None),
                         ("completed", EvaluationStatus.PASSED)])
    assert client(server, retries=4).evaluate("src", GEMM).status is EvaluationStatus.PASSED
    assert server.submits == 5


def test_retries_run_out_with_an_exception_not_a_verdict():
    server = FakeServer([("failed", EvaluationStatus.INFRA_ERROR)] * 3)
    with pytest.raises(ProfilerUnavailable) as info:
        client(server, retries=2).evaluate("src", GEMM)
    assert server.submits == 3 and info.value.last_result.status is EvaluationStatus.INFRA_ERROR


def test_bad_requests_raise_at_once():
    for code in (400, 401, 404, 413, 422):
        server = FakeServer([code])
        with pytest.raises(ProfilerRequestError) as info:
            client(server).evaluate("src", GEMM)
        assert info.value.status_code == code and server.submits == 1


def test_against_the_service(start_service):
    svc = start_service(gpus=(0,))
    with ProfilerClient(svc.url, timeout_s=60) as c:
        assert c.health()["status"] == "ok"
        assert any(d["name"] == GEMM for d in c.definitions())
        assert c.evaluate("// ok\n", GEMM, client_tag="t").status is EvaluationStatus.PASSED
        assert c.evaluate("// FAKE:wrong\n", GEMM).status is EvaluationStatus.INCORRECT_NUMERICAL
        san = c.evaluate("// ok\n", GEMM, kind="sanitize")
        assert san.sanitizer is not None and san.performance is None
        ids = c.submit_batch([{"definition": GEMM, "source": "// a\n"}, {"definition": GEMM, "source": "// b\n"}])
        assert [s.state for s in c.poll_many(ids, wait_s=30)] == ["completed", "completed"]
        with pytest.raises(ProfilerRequestError):
            c.evaluate("x", "no_such_problem")
    with ProfilerClient("http://127.0.0.1:9", retries=1, backoff_s=0.01) as dead:
        with pytest.raises(ProfilerUnavailable):
            dead.evaluate("x", GEMM)
