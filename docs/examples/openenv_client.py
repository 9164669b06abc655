"""An OpenEnv-style client of PTXBench's training environment: `reset()` / `step(action)` / `state()` returning
results with `observation`, `reward` and `done`, over the HTTP front (`ptxbench env serve`). No OpenEnv import: the
shapes follow its HTTP client (StepResult of observation, reward, done), so an OpenEnv training loop can drive it.

    with PTXBenchEnv("http://127.0.0.1:8790", problem="gemm_n7168_k5120") as env:
        result = env.reset()
        while not result.done:
            result = env.step(KernelAction(completion=policy(result.observation.messages)))
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ptxcore.gym.http import EnvClient


@dataclass(frozen=True)
class KernelAction:
    """The policy's answer: one message holding one code block."""

    completion: str


@dataclass(frozen=True)
class KernelObservation:
    """What the policy sees: the whole next call's messages, and the verdict envelope of the last step."""

    messages: list[dict[str, str]]
    info: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class OpenEnvResult:
    """OpenEnv's StepResult shape."""

    observation: KernelObservation
    reward: float | None
    done: bool


class PTXBenchEnv:
    """One remote environment, OpenEnv-style."""

    def __init__(self, url: str, problem: str, token: str | None = None, **fields: Any) -> None:
        self.client = EnvClient(url, token=token)
        self.env = self.client.create(problem, **fields)
        self._episode: dict[str, Any] = {}

    def reset(self, seed: int = 0) -> OpenEnvResult:
        first = self.env.reset(seed=seed)
        self._episode = {"trajectory_id": first.trajectory_id, "step_count": 0}
        return OpenEnvResult(KernelObservation(first.observation), reward=None, done=False)

    def step(self, action: KernelAction) -> OpenEnvResult:
        result = self.env.step(action.completion)
        self._episode["step_count"] += 1
        done = result.terminated or result.truncated
        return OpenEnvResult(KernelObservation(result.next_messages, result.info.model_dump(mode="json")),
                             reward=result.reward, done=done)

    def state(self) -> dict[str, Any]:
        return dict(self._episode)

    def close(self) -> None:
        self.env.close()
        self.client.close()

    def __enter__(self) -> PTXBenchEnv:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
