"""Client of the profiling service (ptxcore.gpu.service). Light: httpx and ptxcore.schema only.

    client = ProfilerClient("http://127.0.0.1:8765", token=None, timeout_s=1800, retries=3)
    result = client.evaluate(source_text, "gemm_n7168_k5120", arch="hopper")   # -> JudgeResult

Retries happen for infrastructure failures only: connection errors, HTTP 5xx (503 included: queue
full or shutting down), tasks the service reports `failed` or `lost`, and INFRA_ERROR verdicts. A
candidate's verdict (PASSED, INCORRECT_*, RUNTIME_ERROR, TIMEOUT, ...) is returned as is, never retried.
When retries run out, ProfilerUnavailable is raised (an infrastructure failure raises; it is never a
verdict). A 4xx answer (bad request, unknown problem, missing token) raises ProfilerRequestError at once.

The token: the one given, else the per-start token of a loopback service on the URL's port (a 0600 file the
service writes, ptxcore.gpu.service.tokenfile), else $PTXBENCH_PROFILER_TOKEN.
"""

from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass
from typing import Any

import httpx

from ptxcore.gpu.service.tokenfile import local_token
from ptxcore.schema import EvaluationStatus, JudgeResult

log = logging.getLogger(__name__)

URL_ENV = "PTXBENCH_PROFILER_URL"
TOKEN_ENV = "PTXBENCH_PROFILER_TOKEN"
TERMINAL_STATES = ("completed", "failed", "lost")


class ProfilerError(RuntimeError):
    """Base of the client's errors."""


class ProfilerRequestError(ProfilerError):
    """The service refused the request (4xx): fix the request; retrying will not help."""

    def __init__(self, status_code: int, detail: str) -> None:
        super().__init__(f"profiling service refused the request ({status_code}): {detail}")
        self.status_code, self.detail = status_code, detail


class ProfilerUnavailable(ProfilerError):
    """Infrastructure failed on every try. Not a verdict: never charge it to the candidate."""

    def __init__(self, message: str, last_result: JudgeResult | None = None) -> None:
        super().__init__(message)
        self.last_result = last_result


@dataclass(frozen=True)
class TaskStatus:
    """A task as the service reports it."""

    task_id: str
    state: str
    """pending | running | completed | failed | lost."""
    result: JudgeResult | None
    error: str
    gpu: int | None
    raw: dict[str, Any]

    @property
    def terminal(self) -> bool:
        return self.state in TERMINAL_STATES


def _status(data: dict[str, Any]) -> TaskStatus:
    result = data.get("result")
    return TaskStatus(task_id=data["task_id"], state=data["state"], error=data.get("error", ""),
                      result=JudgeResult.model_validate(result) if result else None, gpu=data.get("gpu"), raw=data)


def resolve_token(url: str) -> str | None:
    """The token to send to `url` when none is given: for a loopback URL, the per-start token of the live service on
    that port (ptxcore.gpu.service.tokenfile); else $PTXBENCH_PROFILER_TOKEN; else none."""
    return local_token(url) or os.environ.get(TOKEN_ENV) or None


class ProfilerClient:
    def __init__(self, url: str, token: str | None = None, timeout_s: float = 1800.0, retries: int = 3,
                 backoff_s: float = 1.0, poll_wait_s: float = 30.0, transport: httpx.BaseTransport | None = None):
        """`token`: sent with every request; None: `resolve_token(url)`."""
        self.url, self.timeout_s, self.retries = url.rstrip("/"), timeout_s, retries
        self.backoff_s, self.poll_wait_s = backoff_s, poll_wait_s
        self._resolved = token is None  # a found token is looked up again after a 401 (the service restarted)
        token = token if token is not None else resolve_token(self.url)
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self._http = httpx.Client(base_url=self.url, headers=headers, timeout=httpx.Timeout(60.0),
                                  transport=transport)

    @classmethod
    def from_env(cls, **kwargs: Any) -> ProfilerClient:
        """URL from $PTXBENCH_PROFILER_URL, token as `resolve_token` finds it."""
        url = os.environ.get(URL_ENV)
        if not url:
            raise ProfilerError(f"${URL_ENV} is not set")
        return cls(url, **kwargs)

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> ProfilerClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- one call each (no retries) --------------------------------------------------------------------

    def submit(self, source: str, problem: str, arch: str = "hopper", *, kind: str = "evaluate",
               workload_uuid: str | None = None, timeout_s: float | None = None, client_tag: str = "",
               language: str = "cuda") -> str:
        """Submit; returns the task id. `language`: cuda (kernel.cu) or triton (kernel.py); sent when not cuda
        (the service's default), so a CUDA request is the same as before the field existed."""
        body = {"definition": problem, "source": source, "arch": arch, "workload_uuid": workload_uuid,
                "timeout_s": timeout_s, "client_tag": client_tag, "language": None if language == "cuda" else language}
        return self._call("POST", f"/{kind}", json={k: v for k, v in body.items() if v is not None})["task_id"]

    def submit_batch(self, items: list[dict[str, Any]]) -> list[str]:
        """POST /batch; items are submit bodies with an optional `kind`."""
        return [t["task_id"] for t in self._call("POST", "/batch", json={"items": items})["tasks"]]

    def poll(self, task_id: str, wait_s: float = 0.0) -> TaskStatus:
        """One (long-)poll."""
        return _status(self._call("GET", f"/tasks/{task_id}", params={"wait_s": wait_s}, timeout=wait_s + 60))

    def poll_many(self, task_ids: list[str], wait_s: float = 0.0) -> list[TaskStatus]:
        data = self._call("POST", "/tasks/batch", json={"task_ids": task_ids, "wait_s": wait_s}, timeout=wait_s + 60)
        return [_status(d) for d in data]

    def health(self) -> dict[str, Any]:
        return self._call("GET", "/health")

    def definitions(self) -> list[dict[str, Any]]:
        return self._call("GET", "/definitions")

    # -- the judge call, with retries ------------------------------------------------------------------

    def wait(self, task_id: str, timeout_s: float | None = None) -> TaskStatus:
        """Long-poll until the task is terminal. Polls that fail (the service restarting) are repeated
        with back-off: the task store is durable, so afterwards the poll gives the result or `lost`.
        ProfilerUnavailable after `timeout_s`, or when the service stays unreachable."""
        limit = timeout_s or self.timeout_s
        deadline = time.monotonic() + limit
        failures = 0
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise ProfilerUnavailable(f"task {task_id} not finished within {limit:g} s")
            try:
                status = self.poll(task_id, wait_s=min(self.poll_wait_s, left))
            except ProfilerUnavailable:
                failures += 1
                if failures > self.retries + 2:
                    raise
                time.sleep(min(self.backoff_s * 2 ** (failures - 1), 30.0, max(left, 0.0)))
                continue
            failures = 0
            if status.terminal:
                return status

    def evaluate(self, source: str, problem: str, arch: str = "hopper", *, kind: str = "evaluate",
                 workload_uuid: str | None = None, timeout_s: float | None = None, client_tag: str = "",
                 language: str = "cuda") -> JudgeResult:
        """Submit and wait; retries infrastructure failures (resubmitting), returns the verdict."""
        last: JudgeResult | None = None
        reasons: list[str] = []
        for attempt in range(self.retries + 1):
            if attempt:
                time.sleep(self.backoff_s * 2 ** (attempt - 1))
            try:
                task_id = self.submit(source, problem, arch, kind=kind, workload_uuid=workload_uuid,
                                      timeout_s=timeout_s, client_tag=client_tag, language=language)
                return self._verdict(self.wait(task_id))
            except ProfilerUnavailable as exc:
                last = exc.last_result or last
                reasons.append(str(exc))
                log.warning("profiler try %d/%d failed: %s", attempt + 1, self.retries + 1, exc)
        raise ProfilerUnavailable(f"profiling service failed {self.retries + 1} time(s); last: {reasons[-1]}", last)

    @staticmethod
    def _verdict(status: TaskStatus) -> JudgeResult:
        if status.state != "completed" or status.result is None:
            raise ProfilerUnavailable(f"task {status.task_id} {status.state}: {status.error}", status.result)
        if status.result.status is EvaluationStatus.INFRA_ERROR:
            raise ProfilerUnavailable(f"INFRA_ERROR: {status.result.reason}", status.result)
        return status.result

    # -- transport -------------------------------------------------------------------------------------

    def _call(self, method: str, path: str, *, json: Any = None, params: dict | None = None,
              timeout: float | None = None) -> Any:
        """One HTTP exchange: connection problems and 5xx raise ProfilerUnavailable, 4xx ProfilerRequestError."""
        try:
            response = self._http.request(method, path, json=json, params=params,
                                          timeout=timeout if timeout is not None else httpx.USE_CLIENT_DEFAULT)
            if response.status_code == 401 and self._refresh_token():  # a restarted service has a new start token
                response = self._http.request(method, path, json=json, params=params,
                                              timeout=timeout if timeout is not None else httpx.USE_CLIENT_DEFAULT)
        except httpx.TransportError as exc:
            raise ProfilerUnavailable(f"{type(exc).__name__}: {exc}") from exc
        if response.status_code >= 500:
            raise ProfilerUnavailable(f"HTTP {response.status_code}: {_detail(response)}")
        if response.status_code >= 400:
            raise ProfilerRequestError(response.status_code, _detail(response))
        return response.json()


    def _refresh_token(self) -> bool:
        """Look the token up again (only one that was found, never one given); True when it changed."""
        if not self._resolved:
            return False
        token = resolve_token(self.url)
        header = f"Bearer {token}" if token else None
        if not token or self._http.headers.get("Authorization") == header:
            return False
        self._http.headers["Authorization"] = header
        return True


def _detail(response: httpx.Response) -> str:
    try:
        detail = response.json().get("detail", response.text)
    except ValueError:
        detail = response.text
    return str(detail)[:500]
