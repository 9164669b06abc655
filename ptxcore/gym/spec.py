"""What one environment is: problem, architecture, prompt variant, reward, turn budget, evaluation profile.

The judge route is not part of the spec a trainer sends: whoever builds the environment picks the judge
(`ptxcore.gym.build`), as a campaign's owner does, so no request can name a plugin or a folder to read.
"""

from __future__ import annotations

import re

from pydantic import Field, field_validator

from ptxcore.agent.types import MAX_MODEL_CALLS, AgentConfig, ContextPolicy
from ptxcore.schema import CampaignLanguage, FrozenModel, Language

from .profiles import ProfileName
from .reward import DEFAULT_REWARD, RewardSpec

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.\-]{0,127}")
_MODEL = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:@+\-/]{0,199}")
NAME_RULE = "letters, digits, '_', '-', '.' (at most 128, starting with a letter or digit)"
DEFAULT_POLICY = "policy/unnamed"
"""The policy's model id where the trainer names none."""


class EpisodeChoice(FrozenModel):
    """What a trainer may choose of an environment (the HTTP front's request is exactly this, plus a reward)."""

    problem: str = Field(min_length=1, max_length=128)
    """Definition name."""
    arch: str = Field(default="hopper", min_length=1, max_length=32)
    """Architecture key (one the judge serves)."""
    prompt_variant: str = Field(default="hopper-pack", min_length=1, max_length=128)
    """Prompt variant (knowledge level) whose prompt is the first observation."""
    language: CampaignLanguage = Language.CUDA
    """Solution language (decides the expected code fence)."""
    max_turns: int = Field(default=MAX_MODEL_CALLS, ge=1, le=MAX_MODEL_CALLS)
    """Turn budget (the paper's 8 model calls): the episode is truncated after it."""
    target_speedup: float = Field(default=1.2, gt=0.0, le=1000.0)
    """A correct turn at this speedup ends the episode (terminated)."""
    context_policy: ContextPolicy = ContextPolicy.FULL
    """What the next observation's messages hold of earlier turns (the record keeps everything)."""
    profile: ProfileName = ProfileName.STANDARD
    """Evaluation profile (trials, timed calls, timeouts)."""
    policy_model: str = Field(default=DEFAULT_POLICY, min_length=1, max_length=200)
    """The acting policy's model id (recorded as the turns' model)."""

    @field_validator("problem", "prompt_variant", "arch")
    @classmethod
    def _name(cls, v: str) -> str:
        return _named(v)

    @field_validator("policy_model")
    @classmethod
    def _model(cls, v: str) -> str:
        if not _MODEL.fullmatch(v):
            raise ValueError("not a model id (letters, digits and _.:@+-/ only, at most 200)")
        return v


class EnvSpec(EpisodeChoice):
    """One environment: every episode of it plays one (problem, architecture, prompt variant)."""

    run_id: str = Field(default="env", min_length=1, max_length=128)
    """The warehouse campaign its episodes are recorded under (source `environment`)."""
    reward: RewardSpec = DEFAULT_REWARD
    """How verdicts become rewards."""

    @field_validator("run_id")
    @classmethod
    def _run_id(cls, v: str) -> str:
        return _named(v)

    def agent_config(self) -> AgentConfig:
        """The agent loop's configuration of this environment (the same stop rules as a campaign's)."""
        return AgentConfig(max_turns=self.max_turns, target_speedup=self.target_speedup,
                           context_policy=self.context_policy, language=self.language)


def _named(v: str) -> str:
    if not _NAME.fullmatch(v):
        raise ValueError(f"use {NAME_RULE}")
    return v
