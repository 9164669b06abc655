"""Campaign and trajectory records (the warehouse's parent rows of TurnRecord)."""

from __future__ import annotations

from enum import Enum

from pydantic import Field

from .base import SCHEMA_VERSION, FrozenModel


class StopReason(str, Enum):
    """Why a trajectory ended."""

    TARGET_REACHED = "target_reached"
    """A correct turn reached the target speedup (early stop)."""
    MAX_TURNS = "max_turns"
    """The model-call budget was used up."""
    CONTEXT_OVERFLOW = "context_overflow"
    """The next call would overflow the model's context window."""
    ERROR = "error"
    """An unrecoverable infrastructure error ended it."""
    RUNNING = "running"
    """Not finished (yet)."""
    UNKNOWN = "unknown"
    """Ended for a reason that was not recorded (imported data)."""


class CampaignRecord(FrozenModel):
    """One campaign: a grid of trajectories run under one configuration."""

    schema_version: int = SCHEMA_VERSION
    """Record schema version."""
    campaign_id: str
    """Identity; rerunning the same id resumes."""
    name: str = ""
    """Human name."""
    config_yaml: str = ""
    """The campaign file as run."""
    config_sha256: str = ""
    """Hash of config_yaml."""
    created_at: str = ""
    """ISO-8601 time of the first run."""
    ptxbench_version: str = ""
    """Package version."""
    git_commit: str = ""
    """Source revision, when known."""


class TrajectoryRecord(FrozenModel):
    """One trajectory: up to N model calls on one (model, arch, variant, problem)."""

    schema_version: int = SCHEMA_VERSION
    """Record schema version."""
    campaign_id: str
    """Parent campaign."""
    trajectory_id: str
    """Identity, unique within the campaign."""
    model: str
    """litellm model string."""
    arch: str
    """Architecture key."""
    prompt_variant: str
    """Prompt variant name."""
    problem: str
    """Definition name."""
    language: str = "cuda"
    """Solution language (cuda or triton)."""
    index: int = Field(default=0, ge=0)
    """Trajectory number within its (model, arch, variant, problem) cell."""
    max_turns: int = 8
    """Model-call budget."""
    num_turns: int = 0
    """Turns recorded."""
    stop_reason: StopReason = StopReason.RUNNING
    """Why it ended."""
    best_speedup: float | None = None
    """Best speedup over correct turns."""
    started_at: str = ""
    """ISO-8601."""
    finished_at: str = ""
    """ISO-8601."""
