"""Playing episodes: a policy (any agent model client: litellm, replay, a trainer's sampler) against an environment.

`rollout` is the agent loop seen from outside the environment: the policy answers the observation, the environment
judges the answer, until the episode ends. It is what `ptxbench env demo` runs with the replay policy and what a
trainer's `rollout_func` does with its own sampler (docs/examples/trl_grpo_rollout.py).
"""

from __future__ import annotations

from pydantic import Field

from ptxcore.agent.types import LLMClient
from ptxcore.schema import EvaluationStatus, FrozenModel, StopReason

from .env import KernelEnv
from .reward import discounted_return


class EpisodeResult(FrozenModel):
    """One finished episode."""

    trajectory_id: str
    """The episode's trajectory id in the records."""
    problem: str
    """Definition name."""
    seed: int = Field(ge=0)
    """The seed it was reset with."""
    statuses: list[EvaluationStatus]
    """Each step's verdict."""
    rewards: list[float]
    """Each step's reward."""
    gamma: float = Field(gt=0.0, le=1.0)
    """The reward spec's discount."""
    stop_reason: StopReason
    """Why it ended."""
    best_speedup: float | None = None
    """Best speedup of a correct step (None: none was correct with a measured speedup)."""

    @property
    def total_reward(self) -> float:
        return sum(self.rewards)

    @property
    def discounted_return(self) -> float:
        return discounted_return(self.rewards, self.gamma)


def rollout(env: KernelEnv, policy: LLMClient, seed: int = 0, policy_model: str | None = None) -> EpisodeResult:
    """Reset `env`, then let `policy` answer every observation until the episode ends."""
    first = env.reset(seed, policy_model=policy_model)
    messages = first.observation
    statuses: list[EvaluationStatus] = []
    rewards: list[float] = []
    speedups: list[float] = []
    while True:
        reply = policy.complete(messages, env.call_context())
        result = env.step(reply.text, usage=reply.usage, reasoning=reply.reasoning)
        statuses.append(result.info.status)
        rewards.append(result.reward)
        if result.info.status is EvaluationStatus.PASSED and result.info.speedup is not None:
            speedups.append(result.info.speedup)
        if result.terminated or result.truncated:
            stop = result.info.stop_reason or StopReason.UNKNOWN
            return EpisodeResult(trajectory_id=first.trajectory_id, problem=env.spec.problem, seed=seed,
                                 statuses=statuses, rewards=rewards, gamma=env.spec.reward.gamma, stop_reason=stop,
                                 best_speedup=max(speedups) if speedups else None)
        messages = result.next_messages
