"""Value types of the agent loop: configuration, model replies, turn evaluations and outcomes.

The loop talks to the outside world only through the two protocols at the bottom (`LLMClient`,
`Evaluator`), an optional `TurnObserver` and an optional `FeedbackAugmenter`; fakes live in the tests.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any, Protocol

from pydantic import Field

from ptxcore.schema import (
    CampaignLanguage,
    CompileResult,
    EnvironmentInfo,
    EvaluationStatus,
    FeedbackAugmentation,
    FrozenModel,
    JudgeResult,
    Language,
    LLMUsage,
    SassReport,
    StopReason,
    TargetInstruction,
)

MAX_MODEL_CALLS = 8
"""The paper's budget: at most eight model calls per trajectory."""


class ContextPolicy(StrEnum):
    """Which part of the trajectory the model sees on each call (the full history is always recorded)."""

    FULL = "full"
    """System, task, then every earlier answer and its feedback."""
    LATEST_PAIR = "latest-pair"
    """System, task, and only the latest answer with its feedback."""
    SINGLE_USER = "single-user"
    """System, then everything else concatenated into one user message without role labels."""


class AgentConfig(FrozenModel):
    """How one trajectory runs."""

    max_turns: int = Field(default=MAX_MODEL_CALLS, ge=1, le=MAX_MODEL_CALLS)
    """Model-call budget (turns, including extraction-error turns)."""
    target_speedup: float = Field(default=1.2, gt=0.0)
    """Stop early once a correct turn reaches this speedup over the baseline library."""
    context_policy: ContextPolicy = ContextPolicy.FULL
    """What the model sees of earlier turns."""
    language: CampaignLanguage = Language.CUDA
    """Solution language (decides the expected code fence)."""
    reserve_output_tokens: int = Field(default=0, ge=0)
    """Tokens kept free for the answer when checking the context window (usually the decoding max_tokens)."""


class CallContext(FrozenModel):
    """Who is calling the model: lets providers (replay) and logs identify the call."""

    problem: str
    """Definition name."""
    arch: str
    """Architecture key."""
    prompt_variant: str
    """Prompt variant name."""
    trajectory_index: int = Field(default=0, ge=0)
    """Trajectory number within its (model, arch, variant, problem) cell."""
    turn: int = Field(default=0, ge=0)
    """0-based turn about to be generated."""

    def metadata(self) -> dict[str, Any]:
        return self.model_dump(mode="json")


class LLMReply(FrozenModel):
    """One model answer and what it cost."""

    text: str
    """The answer's visible content."""
    reasoning: str = ""
    """Reasoning content, when the provider returns it."""
    usage: LLMUsage = Field(default_factory=LLMUsage)
    """Token usage, latency and cost."""
    model: str = ""
    """Model string that answered."""
    finish_reason: str = ""
    """Provider's finish reason (stop, length, ...)."""


class TurnEvaluation(FrozenModel):
    """Compile stage plus GPU judge for one extracted kernel, folded into one verdict."""

    status: EvaluationStatus
    """Turn verdict."""
    compile: CompileResult | None = None
    """CPU compile stage (None on extraction error)."""
    sass: SassReport | None = None
    """Static SASS report of the CPU build (None when it did not compile)."""
    judge: JudgeResult | None = None
    """GPU judge envelope (None when the judge did not run)."""
    target_instruction: TargetInstruction = TargetInstruction.UNKNOWN
    """Did the target instructions execute."""
    speedup: float | None = None
    """reference / candidate latency, correct turns only."""
    gpu: str | None = None
    """GPU the turn was judged on (empty when not evaluated)."""
    environment: EnvironmentInfo = Field(default_factory=EnvironmentInfo)
    """Where it was judged."""


class Extraction(FrozenModel):
    """What the extractor found in one answer."""

    code: str | None
    """The kernel source (None unless exactly one block of the expected fence)."""
    fence: str
    """Expected fence tag (cpp or python)."""
    blocks_found: int = Field(ge=0)
    """Number of complete blocks with that fence."""

    @property
    def ok(self) -> bool:
        return self.code is not None


class TurnOutcome(FrozenModel):
    """Everything one turn produced, before it becomes a warehouse record."""

    turn: int = Field(ge=0)
    """0-based turn index."""
    reply: LLMReply
    """The model's answer."""
    extraction: Extraction
    """Extraction result."""
    evaluation: TurnEvaluation
    """Verdict of the extracted kernel (EXTRACTION_ERROR when there was none)."""
    feedback: str
    """The message sent back to the model."""
    augmentation: FeedbackAugmentation | None = None
    """What the feedback augmenter added (None when the loop has none)."""


class AugmentedFeedback(FrozenModel):
    """A feedback augmenter's answer for one turn."""

    text: str = ""
    """Appended to the turn's feedback (after a newline) when not empty."""
    record: FeedbackAugmentation
    """What was added and why (recorded with the turn)."""


class TrajectoryResult(FrozenModel):
    """The turns of one trajectory run (only the ones made in this run) and why it ended."""

    outcomes: list[TurnOutcome] = Field(default_factory=list)
    """Turns made in this run, in order."""
    stop_reason: StopReason
    """Why the loop ended."""
    num_turns: int = Field(ge=0)
    """Turns in the trajectory overall (recorded before this run plus made in it)."""
    best_speedup: float | None = None
    """Best speedup over correct turns, overall."""


class ContextOverflowError(RuntimeError):
    """The provider refused a call because the prompt exceeds the model's context window."""


class LLMClient(Protocol):
    """A chat model. Raises on failure after its own retries (the only retry layer)."""

    def complete(self, messages: list[dict[str, str]], context: CallContext) -> LLMReply: ...

    def context_window_tokens(self) -> int | None: ...

    def count_tokens(self, messages: list[dict[str, str]]) -> int: ...


class Evaluator(Protocol):
    """Compiles and judges one kernel. A bad kernel is a returned verdict; infrastructure failure raises."""

    def evaluate(self, source: str, context: CallContext) -> TurnEvaluation: ...


class FeedbackAugmenter(Protocol):
    """Adds to a turn's feedback (repair retrieval). Pure: an in-memory index, no I/O; may not raise for a
    bad kernel (the kernel is the query, never executed)."""

    def augment(self, kernel: str | None, evaluation: TurnEvaluation, context: CallContext) -> AugmentedFeedback: ...


class TurnObserver(Protocol):
    """Receives each finished turn (e.g. to record it) before the next model call."""

    def __call__(self, outcome: TurnOutcome) -> None: ...
