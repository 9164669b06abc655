"""What an environment step adds to a campaign's records: the reward row beside the turn (table `env_steps`).

The turn itself is an ordinary TurnRecord (turns, evaluations, target_evidence, kernels): everything `ptxbench
report` and the metric views read. The step row adds what only an environment knows: the reward and the spec
that scored it, the discount, the episode's seed and the step's wall time.
"""

from __future__ import annotations

from enum import StrEnum

from pydantic import Field, model_validator

from ptxcore.schema import FrozenModel

from .reward import RewardBasis, RewardBreakdown, RewardSpec


class RecordSource(StrEnum):
    """Who produced a turn."""

    CAMPAIGN = "campaign"
    """A campaign's agent loop (flows/campaign.py)."""
    ENVIRONMENT = "environment"
    """An environment step (ptxcore.gym): a trainer's policy acting."""


class EnvStepRecord(FrozenModel):
    """One environment step, keyed like its turn (campaign_id, trajectory_id, turn)."""

    campaign_id: str = Field(min_length=1)
    """The environment run (a campaign id)."""
    trajectory_id: str = Field(min_length=1)
    """The episode."""
    turn: int = Field(ge=0)
    """0-based step index."""
    source: RecordSource = RecordSource.ENVIRONMENT
    """Always `environment` here (the column tells rollouts from campaigns in SQL)."""
    policy_model: str = Field(min_length=1)
    """The acting policy's model id."""
    seed: int = Field(ge=0)
    """The seed the episode was reset with."""
    reward_spec_sha256: str = Field(min_length=64, max_length=64)
    """The spec that scored the step (table env_reward_specs holds it)."""
    reward: float
    """The step's reward under that spec."""
    reward_basis: RewardBasis
    """What the reward rests on (measured, recorded, unjudged)."""
    reward_compiled: float
    """Compile credit."""
    reward_correct: float
    """Correctness credit."""
    reward_target: float
    """Target-instruction and target-work credit."""
    reward_speedup: float
    """Speed credit."""
    reward_penalty: float = Field(le=0.0)
    """REJECTED / REWARD_HACK penalty."""
    gamma: float = Field(gt=0.0, le=1.0)
    """The spec's discount (the view v_env_returns sums gamma^turn * reward)."""
    terminated: bool
    """The step reached the target speedup (the episode ended on its merit)."""
    truncated: bool
    """The step used up the turn budget."""
    step_s: float = Field(ge=0.0)
    """Wall time of the step (extraction, build, judgement, feedback), seconds."""
    created_at: str = Field(min_length=1)
    """ISO-8601 time."""

    @model_validator(mode="after")
    def _one_end(self) -> EnvStepRecord:
        if self.terminated and self.truncated:
            raise ValueError("a step ends an episode as terminated or as truncated, not both")
        return self

    @classmethod
    def of(cls, key: tuple[str, str, int], *, policy_model: str, seed: int, spec: RewardSpec,
           reward: RewardBreakdown, terminated: bool, truncated: bool, step_s: float, created_at: str) -> EnvStepRecord:
        campaign_id, trajectory_id, turn = key
        return cls(campaign_id=campaign_id, trajectory_id=trajectory_id, turn=turn, policy_model=policy_model,
                   seed=seed, reward_spec_sha256=reward.spec_sha256, reward=reward.total, reward_basis=reward.basis,
                   reward_compiled=reward.compiled, reward_correct=reward.correct, reward_target=reward.target,
                   reward_speedup=reward.speedup, reward_penalty=reward.penalty, gamma=spec.gamma,
                   terminated=terminated, truncated=truncated, step_s=step_s, created_at=created_at)


class RewardSpecRecord(FrozenModel):
    """A reward spec as recorded (table env_reward_specs), so a step's reward can be recomputed."""

    sha256: str = Field(min_length=64, max_length=64)
    """The spec's identity."""
    name: str
    """Its name."""
    spec_json: str
    """Its canonical JSON."""

    @classmethod
    def of(cls, spec: RewardSpec) -> RewardSpecRecord:
        return cls(sha256=spec.sha256, name=spec.name, spec_json=spec.canonical_json())
