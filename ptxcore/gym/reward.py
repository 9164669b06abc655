"""The reward spec: staged credit for one turn's verdict, as data (YAML or pydantic), and the discounted return.

A turn earns, in stages (each only when the stage before it holds):
  compiled        the kernel built (also for a wrong or crashing one)
  correct         PASSED
  target_executed the target instructions executed (Nsight Compute's counts, or a recorded verdict's)
  target_carries  the target path carried the problem's work (the evidence's work share, issue 25)
  speedup         `speedup_per_log2` x log2(speedup), clipped to [speedup_log2_min, speedup_log2_max]
and a REJECTED or REWARD_HACK verdict earns its penalty instead of everything else. An extraction or compile error
earns 0. A turn nobody judged (NOT_EVALUATED) earns what the CPU stages prove (compiled) and says so in its basis.

The default sums to 1.0 for a correct kernel whose target path carries the work at 4x the library; the spec's
sha256 is recorded with every step, and every input of the formula is a warehouse column, so old steps can be
re-scored with another spec by SQL alone (docs/environment.md).
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from enum import StrEnum
from pathlib import Path

from pydantic import Field, model_validator

from ptxcore.schema import EvaluationStatus, FrozenModel, TargetInstruction, TargetWork, text_sha256

BUILT_ONLY = frozenset({EvaluationStatus.INCORRECT_NUMERICAL, EvaluationStatus.INCORRECT_SHAPE,
                         EvaluationStatus.INCORRECT_DTYPE, EvaluationStatus.RUNTIME_ERROR, EvaluationStatus.TIMEOUT,
                         EvaluationStatus.NOT_EVALUATED})
"""Verdicts of a kernel that built but was not shown correct: the compile credit only."""


class RewardBasis(StrEnum):
    """What a turn's reward rests on."""

    MEASURED = "measured"
    """A verdict this judgement reached on a GPU (or a CPU-stage verdict: extraction, compile, forbidden source)."""
    RECORDED = "recorded"
    """A verdict reused from an earlier GPU judgement of the same kernel (JudgeResult.recorded)."""
    UNJUDGED = "unjudged"
    """No GPU judged the kernel (NOT_EVALUATED): only the CPU stages' credit is in the reward."""


class RewardSpec(FrozenModel):
    """How a turn's verdict becomes a number. Credits are >= 0, penalties <= 0."""

    name: str = Field(default="staged-v1", min_length=1, max_length=80, pattern=r"^[A-Za-z0-9][A-Za-z0-9_.\-]*$")
    """A name for people (the sha256 is the identity)."""
    compiled: float = Field(default=0.1, ge=0.0, le=10.0)
    """Credit for a kernel that built (any verdict past the compile stage but REJECTED / REWARD_HACK)."""
    correct: float = Field(default=0.3, ge=0.0, le=10.0)
    """Credit for a PASSED verdict."""
    target_executed: float = Field(default=0.1, ge=0.0, le=10.0)
    """Credit for a PASSED kernel whose target instructions executed."""
    target_carries: float = Field(default=0.2, ge=0.0, le=10.0)
    """Credit for a PASSED kernel whose target path carried the problem's work (TargetWork.CARRIES)."""
    speedup_per_log2: float = Field(default=0.15, ge=0.0, le=10.0)
    """Credit per doubling of speed over the library, for a PASSED kernel."""
    speedup_log2_min: float = Field(default=0.0, ge=-10.0, le=10.0)
    """Lower clip of log2(speedup) (0: a kernel slower than the library earns no speed credit and loses none)."""
    speedup_log2_max: float = Field(default=2.0, ge=-10.0, le=10.0)
    """Upper clip of log2(speedup) (2: speedups past 4x earn no more)."""
    rejected: float = Field(default=-0.5, ge=-10.0, le=0.0)
    """Penalty for a REJECTED verdict (forbidden source or library), instead of every credit."""
    reward_hack: float = Field(default=-1.0, ge=-10.0, le=0.0)
    """Penalty for a REWARD_HACK verdict, instead of every credit."""
    gamma: float = Field(default=1.0, gt=0.0, le=1.0)
    """Discount of the trajectory return: G = sum over turns t of gamma^t * r_t."""

    @model_validator(mode="after")
    def _clip_order(self) -> RewardSpec:
        if self.speedup_log2_min > self.speedup_log2_max:
            raise ValueError("speedup_log2_min must not exceed speedup_log2_max")
        return self

    @property
    def sha256(self) -> str:
        """Identity of the spec: the sha256 of its canonical JSON (sorted keys)."""
        return text_sha256(self.canonical_json())

    def canonical_json(self) -> str:
        return json.dumps(self.model_dump(mode="json"), sort_keys=True, separators=(",", ":"))


DEFAULT_REWARD = RewardSpec()
"""The documented default (docs/environment.md)."""


class RewardFacts(FrozenModel):
    """What the reward formula reads of one turn (every field is a warehouse column of the turn)."""

    status: EvaluationStatus
    """The turn's verdict."""
    compiled: bool
    """The CPU build succeeded (turns.compile_status = COMPILED)."""
    target_instruction: TargetInstruction = TargetInstruction.UNKNOWN
    """turns.target_instruction."""
    target_work: TargetWork = TargetWork.UNKNOWN
    """target_evidence.carries."""
    speedup: float | None = None
    """turns.speedup (PASSED turns only; a non-finite or non-positive one earns no speed credit)."""
    recorded: bool = False
    """The verdict was reused from a recorded judgement."""


class RewardBreakdown(FrozenModel):
    """One turn's reward, by stage."""

    spec_sha256: str = Field(min_length=64, max_length=64)
    """The spec that scored it."""
    basis: RewardBasis
    """What the reward rests on."""
    compiled: float = 0.0
    """The compile credit earned."""
    correct: float = 0.0
    """The correctness credit earned."""
    target: float = 0.0
    """Target-instruction and target-work credit earned."""
    speedup: float = 0.0
    """Speed credit earned."""
    penalty: float = Field(default=0.0, le=0.0)
    """REJECTED / REWARD_HACK penalty (0 otherwise)."""

    @property
    def total(self) -> float:
        return self.compiled + self.correct + self.target + self.speedup + self.penalty


def _basis(facts: RewardFacts) -> RewardBasis:
    if facts.status is EvaluationStatus.NOT_EVALUATED:
        return RewardBasis.UNJUDGED
    return RewardBasis.RECORDED if facts.recorded else RewardBasis.MEASURED


def score(spec: RewardSpec, facts: RewardFacts) -> RewardBreakdown:
    """The staged reward of one turn (module docstring)."""
    base = {"spec_sha256": spec.sha256, "basis": _basis(facts)}
    status = facts.status
    if status is EvaluationStatus.REJECTED:
        return RewardBreakdown(**base, penalty=spec.rejected)
    if status is EvaluationStatus.REWARD_HACK:
        return RewardBreakdown(**base, penalty=spec.reward_hack)
    if not facts.compiled or (status not in BUILT_ONLY and status is not EvaluationStatus.PASSED):
        return RewardBreakdown(**base)
    if status is not EvaluationStatus.PASSED:
        return RewardBreakdown(**base, compiled=spec.compiled)
    target = spec.target_executed if facts.target_instruction is TargetInstruction.EXECUTED else 0.0
    target += spec.target_carries if facts.target_work is TargetWork.CARRIES else 0.0
    speed = 0.0
    if facts.speedup is not None and math.isfinite(facts.speedup) and facts.speedup > 0:
        log2 = min(max(math.log2(facts.speedup), spec.speedup_log2_min), spec.speedup_log2_max)
        speed = spec.speedup_per_log2 * log2
    return RewardBreakdown(**base, compiled=spec.compiled, correct=spec.correct, target=target, speedup=speed)


def discounted_return(rewards: Sequence[float], gamma: float) -> float:
    """G_0 = sum_t gamma^t r_t."""
    return sum(r * gamma ** t for t, r in enumerate(rewards))


def returns_to_go(rewards: Sequence[float], gamma: float) -> list[float]:
    """G_t = r_t + gamma G_{t+1}, for every turn t."""
    out, running = [0.0] * len(rewards), 0.0
    for t in range(len(rewards) - 1, -1, -1):
        running = rewards[t] + gamma * running
        out[t] = running
    return out


def load_reward_spec(path: str | Path) -> RewardSpec:
    """A reward spec from a YAML file (YamlModelError: one line naming the file, line and field)."""
    from ptxcore.agent.yamlfile import load_yaml_model

    return load_yaml_model(path, RewardSpec)
