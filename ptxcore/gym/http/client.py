"""The thin Python client of the environment's HTTP front: EnvClient.create(...) -> RemoteEnv with reset / step,
and EnvClient.step_many for several environments at once. Replies are the same records as in process."""

from __future__ import annotations

from typing import Any

import httpx

from ptxcore.gpu.service.tokenfile import local_token

from ..batch import StepFailure
from ..steps import ResetResult, StepResult
from .models import BatchReply

TOKEN_ENV = "PTXBENCH_ENV_TOKEN"
"""The shared token, where the server has one and the caller passes none."""


class EnvRequestError(RuntimeError):
    """The front refused a request: status code and its one-line detail."""

    def __init__(self, status_code: int, detail: str) -> None:
        super().__init__(f"HTTP {status_code}: {detail}")
        self.status_code, self.detail = status_code, detail


class EnvClient:
    """One front. `token`: sent with every request; None: a loopback server's per-start token, else $PTXBENCH_ENV_TOKEN."""

    def __init__(self, url: str, token: str | None = None, timeout_s: float = 3600.0,
                 transport: httpx.BaseTransport | None = None) -> None:
        import os

        self.url = url.rstrip("/")
        token = token or local_token(self.url) or os.environ.get(TOKEN_ENV)
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self._http = httpx.Client(base_url=self.url, headers=headers, timeout=timeout_s, transport=transport)

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> EnvClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def call(self, method: str, path: str, body: Any = None) -> Any:
        response = self._http.request(method, path, json=body)
        if response.status_code >= 400:
            try:
                detail = response.json().get("detail", response.text)
            except ValueError:
                detail = response.text
            raise EnvRequestError(response.status_code, str(detail)[:500])
        return response.json() if response.content else None

    def health(self) -> dict:
        return self.call("GET", "/health")

    def create(self, problem: str, **fields: Any) -> RemoteEnv:
        """A new environment (fields: EnvCreate's: arch, prompt_variant, max_turns, reward, profile, policy_model)."""
        created = self.call("POST", "/envs", {"problem": problem, **fields})
        return RemoteEnv(self, created["env_id"], created["reward_spec_sha256"])

    def step_many(self, steps: list[tuple[RemoteEnv, str]], timeout_s: float | None = None
                  ) -> list[StepResult | StepFailure]:
        body = {"items": [{"env_id": e.env_id, "completion": c} for e, c in steps], "timeout_s": timeout_s}
        return BatchReply.model_validate(self.call("POST", "/step_many", body)).outcomes


class RemoteEnv:
    """An environment on the front, used like a KernelEnv."""

    def __init__(self, client: EnvClient, env_id: str, reward_spec_sha256: str) -> None:
        self.client, self.env_id, self.reward_spec_sha256 = client, env_id, reward_spec_sha256

    def reset(self, seed: int = 0, policy_model: str | None = None) -> ResetResult:
        body = {"seed": seed, "policy_model": policy_model}
        return ResetResult.model_validate(self.client.call("POST", f"/envs/{self.env_id}/reset", body))

    def step(self, completion: str) -> StepResult:
        return StepResult.model_validate(self.client.call("POST", f"/envs/{self.env_id}/step",
                                                          {"completion": completion}))

    def close(self) -> None:
        self.client.call("DELETE", f"/envs/{self.env_id}")
