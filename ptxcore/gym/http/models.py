"""The HTTP front's requests and replies. Every request is untrusted: bounded strings, bounded lists, no field that
names a judge route, a file or a plugin (the server's owner chose those at start)."""

from __future__ import annotations

import re

from pydantic import Field, field_validator

from ptxcore.agent.types import MAX_MODEL_CALLS, ContextPolicy
from ptxcore.schema import CampaignLanguage, FrozenModel, Language

from ..batch import StepFailure
from ..env import MAX_COMPLETION_CHARS
from ..profiles import ProfileName
from ..reward import RewardSpec
from ..spec import DEFAULT_POLICY
from ..steps import StepResult

ENV_ID = re.compile(r"[0-9a-f]{32}")
"""Environment ids: 128 random bits in hex."""
MAX_BATCH = 64
"""Steps in one POST /step_many."""


class EnvCreate(FrozenModel):
    """POST /envs: an environment of the server's run (the EnvSpec fields a trainer may choose)."""

    problem: str = Field(min_length=1, max_length=128)
    """Definition name."""
    arch: str = Field(default="hopper", min_length=1, max_length=32)
    """Architecture key (one the server's judge serves)."""
    prompt_variant: str = Field(default="hopper-pack", min_length=1, max_length=128)
    """Prompt variant (knowledge level)."""
    language: CampaignLanguage = Language.CUDA
    """Solution language."""
    max_turns: int = Field(default=MAX_MODEL_CALLS, ge=1, le=MAX_MODEL_CALLS)
    """Turn budget."""
    target_speedup: float = Field(default=1.2, gt=0.0, le=1000.0)
    """Early stop at this speedup."""
    context_policy: ContextPolicy = ContextPolicy.FULL
    """What the next messages hold of earlier turns."""
    reward: RewardSpec | None = None
    """The reward spec (None: the server's)."""
    profile: ProfileName = ProfileName.STANDARD
    """Evaluation profile."""
    policy_model: str = Field(default=DEFAULT_POLICY, min_length=1, max_length=200)
    """The acting policy's model id."""


class EnvCreated(FrozenModel):
    """Reply of POST /envs."""

    env_id: str
    """The environment's id (path of its reset and step)."""
    reward_spec_sha256: str
    """The spec that scores its steps."""


class ResetRequest(FrozenModel):
    """POST /envs/{env_id}/reset."""

    seed: int = Field(default=0, ge=0, le=2**63 - 1)
    """Recorded with every step of the episode."""
    policy_model: str | None = Field(default=None, min_length=1, max_length=200)
    """Change the acting policy's model id from this episode on (None: keep it)."""


class StepRequest(FrozenModel):
    """POST /envs/{env_id}/step."""

    completion: str = Field(max_length=MAX_COMPLETION_CHARS)
    """The policy's answer to the last observation."""


class BatchItem(StepRequest):
    """One step of POST /step_many."""

    env_id: str = Field(min_length=32, max_length=32)
    """Which environment."""

    @field_validator("env_id")
    @classmethod
    def _id(cls, v: str) -> str:
        if not ENV_ID.fullmatch(v):
            raise ValueError("not an environment id")
        return v


class BatchRequest(FrozenModel):
    """POST /step_many: steps of different environments, run concurrently."""

    items: list[BatchItem] = Field(min_length=1, max_length=MAX_BATCH)
    """The steps (one per environment)."""
    timeout_s: float | None = Field(default=None, gt=0.0, le=7200.0)
    """Per-step timeout (None: the profile's step timeout)."""

    @field_validator("items")
    @classmethod
    def _distinct(cls, v: list[BatchItem]) -> list[BatchItem]:
        if len({i.env_id for i in v}) != len(v):
            raise ValueError("one step per environment in a batch")
        return v


class BatchReply(FrozenModel):
    """Reply of POST /step_many, in the order of the items."""

    outcomes: list[StepResult | StepFailure]
    """A StepResult, or a StepFailure saying why there is none."""
