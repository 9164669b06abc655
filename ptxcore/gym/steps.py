"""What reset and step return: observations, rewards, the episode's end and the verdict envelope."""

from __future__ import annotations

from typing import Any

from pydantic import Field, model_validator

from ptxcore.schema import (
    CompileResult,
    EvaluationStatus,
    FrozenModel,
    JudgeResult,
    StopReason,
    TargetInstruction,
    TargetWork,
    TurnRecord,
)

from .reward import RewardBreakdown

Message = dict[str, str]
"""One chat message: {"role": ..., "content": ...}."""


class ResetResult(FrozenModel):
    """The first observation of an episode."""

    observation: list[Message]
    """The messages of the first model call (system, then the task), as MiniPTXAgent sends them."""
    trajectory_id: str
    """The episode's trajectory id in the records."""
    prompt_sha256: str
    """Hash of the assembled system prompt (turns.prompt_sha256)."""
    reward_spec_sha256: str
    """The reward spec that will score the episode."""


class StepInfo(FrozenModel):
    """The verdict envelope of one step: what the judge found and how it was scored."""

    trajectory_id: str
    """The episode."""
    turn: int = Field(ge=0)
    """0-based step index."""
    status: EvaluationStatus
    """The turn's verdict."""
    target_instruction: TargetInstruction
    """Did the target instructions execute."""
    target_work: TargetWork
    """Did the target path carry the work."""
    speedup: float | None = None
    """reference / candidate latency (PASSED only)."""
    kernel_sha256: str | None = None
    """The extracted kernel's hash (None: nothing was extracted)."""
    reward: RewardBreakdown
    """The reward by stage, with the spec's hash and basis."""
    stop_reason: StopReason | None = None
    """Why the episode ended at this step (None: it goes on)."""
    step_s: float = Field(ge=0.0)
    """Wall time of the step, seconds."""
    compile: CompileResult | None = None
    """The CPU stage (None on extraction error)."""
    judge: JudgeResult | None = None
    """The judge's envelope (None when the judge did not run); `judge.recorded` says when it was reused."""

    @classmethod
    def of(cls, record: TurnRecord, reward: RewardBreakdown, stop: StopReason | None, step_s: float) -> StepInfo:
        return cls(trajectory_id=record.trajectory_id, turn=record.turn, status=record.status,
                   target_instruction=record.target_instruction, target_work=record.target_work,
                   speedup=record.speedup, kernel_sha256=record.kernel_sha256, reward=reward, stop_reason=stop,
                   step_s=step_s, compile=record.compile, judge=record.judge)


class StepResult(FrozenModel):
    """One step: Gymnasium's (observation, reward, terminated, truncated, info), plus the next call's messages."""

    observation: Message
    """The feedback message the agent would send next."""
    reward: float
    """The step's reward (info.reward.total)."""
    terminated: bool
    """The episode ended on its merit (a correct turn at the target speedup)."""
    truncated: bool
    """The episode ran out of turns."""
    next_messages: list[Message] = Field(default_factory=list)
    """The whole next model call under the context policy (empty once the episode ended)."""
    info: StepInfo
    """The verdict envelope."""

    @model_validator(mode="after")
    def _ends(self) -> StepResult:
        if self.terminated and self.truncated:
            raise ValueError("a step is terminated or truncated, not both")
        if (self.terminated or self.truncated) and self.next_messages:
            raise ValueError("an ended episode has no next call")
        return self

    def as_tuple(self) -> tuple[Message, float, bool, bool, dict[str, Any]]:
        """Gymnasium's five-tuple (info as JSON-ready data)."""
        return self.observation, self.reward, self.terminated, self.truncated, self.info.model_dump(mode="json")
