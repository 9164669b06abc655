"""Campaign and trajectory records (the warehouse's parent rows of TurnRecord)."""

from __future__ import annotations

from enum import Enum

from pydantic import Field, field_validator

from .base import SCHEMA_VERSION, FrozenModel
from .migrate import empty_to_none


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
    config_sha256: str | None = None
    """Hash of config_yaml (None: not recorded, e.g. imported data)."""
    created_at: str | None = None
    """ISO-8601 time of the first run (None: not recorded, e.g. imported data)."""
    ptxbench_version: str | None = None
    """Package version (None: not installed as a package)."""
    git_commit: str | None = None
    """Source revision (None: not a git checkout, or git is missing)."""

    # rows written before these were optional stored "" for "unknown"
    _unknown = field_validator("config_sha256", "created_at", "ptxbench_version", "git_commit",
                               mode="before")(empty_to_none)


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
    started_at: str | None = None
    """ISO-8601 (None: not recorded, e.g. a trajectory found finished on resume with no earlier record)."""
    finished_at: str | None = None
    """ISO-8601 (None while it runs)."""

    _unknown = field_validator("started_at", "finished_at", mode="before")(empty_to_none)
