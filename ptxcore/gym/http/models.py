"""The HTTP front's requests and replies. Every request is untrusted: bounded strings, bounded lists, no field that
names a judge route, a file or a plugin (the server's owner chose those at start)."""

from __future__ import annotations

import re

from pydantic import Field, field_validator

from ptxcore.schema import FrozenModel

from ..batch import StepFailure
from ..env import MAX_COMPLETION_CHARS
from ..reward import RewardSpec
from ..spec import EpisodeChoice
from ..steps import StepResult

ENV_ID = re.compile(r"[0-9a-f]{32}")
"""Environment ids: 128 random bits in hex."""
MAX_BATCH = 64
"""Steps in one POST /step_many."""


class EnvCreate(EpisodeChoice):
    """POST /envs: an environment of the server's run (what a trainer may choose, and a reward)."""

    reward: RewardSpec | None = None
    """The reward spec (None: the server's)."""


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
