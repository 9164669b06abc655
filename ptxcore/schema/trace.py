"""FlashInfer-Trace Trace / Evaluation, with our status enum."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from .base import FrozenModel, NonEmptyString
from .enums import EvaluationStatus
from .workload import Workload


class Correctness(FrozenModel):
    """Numerical agreement with the reference."""

    max_relative_error: float = 0.0
    """Largest |out-ref| / |ref| over all elements and trials."""
    max_absolute_error: float = 0.0
    """Largest |out-ref| over all elements and trials."""
    extra: dict[str, Any] | None = None
    """Further statistics (matched ratio, strict allclose verdict, trials)."""


class Performance(FrozenModel):
    """Latency against the reference library."""

    latency_ms: float = Field(default=0.0, ge=0.0)
    """Candidate kernel time per call, ms (mean of per-trial medians)."""
    reference_latency_ms: float = Field(default=0.0, ge=0.0)
    """Baseline library time per call, ms, measured the same way."""
    speedup_factor: float = Field(default=0.0, ge=0.0)
    """reference_latency_ms / latency_ms."""


class Environment(FrozenModel):
    """Where the evaluation ran."""

    hardware: NonEmptyString
    """GPU name, e.g. NVIDIA H200."""
    libs: dict[str, str] = Field(default_factory=dict)
    """Versions: driver, toolkit, torch, ..."""


class Evaluation(FrozenModel):
    """Result of judging one solution on one workload."""

    status: EvaluationStatus
    """Verdict."""
    environment: Environment
    """Where it ran."""
    timestamp: NonEmptyString
    """ISO-8601 time of the verdict."""
    log: str = ""
    """Trimmed log for feedback."""
    correctness: Correctness | None = None
    """Numerical statistics when outputs were compared."""
    performance: Performance | None = None
    """Timing when the solution was correct."""


class Trace(FrozenModel):
    """Definition + workload (+ solution name + evaluation). Without the last two: a workload trace."""

    definition: NonEmptyString
    """Definition name."""
    workload: Workload
    """The workload."""
    solution: str | None = None
    """Solution name."""
    evaluation: Evaluation | None = None
    """Its evaluation."""
