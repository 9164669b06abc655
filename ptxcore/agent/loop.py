"""MiniPTXAgent: the paper's multi-turn loop, with no I/O of its own.

Each turn: (stop checks) -> model call -> extract one kernel -> evaluate (compile + judge) -> feedback.
The model client, the evaluator, the turn observer and an optional feedback augmenter (repair retrieval)
are passed in; everything here is pure bookkeeping, so the Prefect flow, the tests and a plain script
drive the same loop.

Stop rules, checked before every model call:
  * a correct turn reached the target speedup          -> TARGET_REACHED
  * the model-call budget (max_turns) is used up         -> MAX_TURNS
  * the next call would overflow the context window      -> CONTEXT_OVERFLOW
An extraction error is a turn like any other (it counts against the budget).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from pydantic import Field

from ptxcore.schema import EvaluationStatus, FrozenModel, StopReason, TurnRecord

from .context import messages_for_call
from .extraction import extract_kernel, extraction_feedback
from .feedback import format_feedback
from .types import (
    AgentConfig,
    CallContext,
    ContextOverflowError,
    Evaluator,
    FeedbackAugmenter,
    LLMClient,
    TrajectoryResult,
    TurnEvaluation,
    TurnObserver,
    TurnOutcome,
)

log = logging.getLogger(__name__)


class PriorTurn(FrozenModel):
    """A turn recorded earlier (resume): what the model said and what it was told."""

    response_text: str
    """The model's raw answer."""
    feedback: str
    """The feedback it received."""
    status: EvaluationStatus
    """The turn's verdict."""
    speedup: float | None = None
    """Speedup when correct."""

    @classmethod
    def from_record(cls, record: TurnRecord) -> PriorTurn:
        return cls(response_text=record.response_text, feedback=record.feedback, status=record.status,
                   speedup=record.speedup)


class AgentState(FrozenModel):
    """The trajectory so far."""

    system: str
    """System prompt."""
    user: str
    """Task prompt."""
    turns: list[PriorTurn] = Field(default_factory=list)
    """Finished turns, in order."""

    @property
    def pairs(self) -> list[tuple[str, str]]:
        return [(t.response_text, t.feedback) for t in self.turns]

    @property
    def best_speedup(self) -> float | None:
        return best_speedup(self.turns)

    def with_turn(self, turn: PriorTurn) -> AgentState:
        return self.model_copy(update={"turns": [*self.turns, turn]})


def best_speedup(turns: Sequence[PriorTurn]) -> float | None:
    """The best speedup of the correct turns (None when no turn was correct with a measured speedup)."""
    speedups = [t.speedup for t in turns if t.status is EvaluationStatus.PASSED and t.speedup is not None]
    return max(speedups) if speedups else None


def stop_rule(turns: Sequence[PriorTurn], config: AgentConfig) -> StopReason | None:
    """Why no further model call may be made after `turns`, before looking at the context window: the target
    speedup reached, or the model-call budget used up (None: another call may be made)."""
    best = best_speedup(turns)
    if best is not None and best >= config.target_speedup:
        return StopReason.TARGET_REACHED
    if len(turns) >= config.max_turns:
        return StopReason.MAX_TURNS
    return None


def messages_for_turn(state: AgentState, config: AgentConfig) -> list[dict[str, str]]:
    """The messages of the next model call after `state` (the first messages and the kept turns, as the context
    policy keeps them): a pure rule, like stop_rule, for callers that hold no model client (the environment)."""
    return messages_for_call(state.system, state.user, state.pairs, config.context_policy)


class MiniPTXAgent:
    """Runs (or resumes) one trajectory."""

    def __init__(self, llm: LLMClient, evaluator: Evaluator, config: AgentConfig | None = None,
                 augmenter: FeedbackAugmenter | None = None) -> None:
        self.llm = llm
        self.evaluator = evaluator
        self.config = config or AgentConfig()
        self.augmenter = augmenter

    def next_messages(self, state: AgentState) -> list[dict[str, str]]:
        return messages_for_turn(state, self.config)

    def would_overflow(self, messages: list[dict[str, str]]) -> bool:
        window = self.llm.context_window_tokens()
        if not window:
            return False
        needed = self.llm.count_tokens(messages) + self.config.reserve_output_tokens
        return needed > window

    def take_turn(self, state: AgentState, context: CallContext, messages: list[dict[str, str]]) -> TurnOutcome:
        """One model call, extraction, evaluation and feedback."""
        turn = len(state.turns)
        ctx = context.model_copy(update={"turn": turn})
        reply = self.llm.complete(messages, ctx)
        extraction = extract_kernel(reply.text, self.config.language)
        if not extraction.ok:
            evaluation = TurnEvaluation(status=EvaluationStatus.EXTRACTION_ERROR)
            feedback = extraction_feedback(extraction)
        else:
            evaluation = self.evaluator.evaluate(extraction.code or "", ctx)
            feedback = format_feedback(evaluation, ctx.arch)
        augmentation = None
        if self.augmenter is not None:
            added = self.augmenter.augment(extraction.code, evaluation, ctx)
            feedback = f"{feedback}\n{added.text}" if added.text else feedback
            augmentation = added.record
        return TurnOutcome(turn=turn, reply=reply, extraction=extraction, evaluation=evaluation, feedback=feedback,
                           augmentation=augmentation)

    def run(
        self,
        system: str,
        user: str,
        context: CallContext,
        prior: Sequence[PriorTurn] = (),
        observer: TurnObserver | None = None,
    ) -> TrajectoryResult:
        """Run until a stop rule fires; `prior` turns (resume) are not repeated."""
        state = AgentState(system=system, user=user, turns=list(prior))
        outcomes: list[TurnOutcome] = []
        while True:
            stop = stop_rule(state.turns, self.config)
            messages = self.next_messages(state) if stop is None else []
            if stop is None and self.would_overflow(messages):
                stop = StopReason.CONTEXT_OVERFLOW
            if stop is not None:
                log.info("%s/%s #%d: stop after %d turns (%s)", context.problem, context.prompt_variant,
                         context.trajectory_index, len(state.turns), stop.value)
                return TrajectoryResult(outcomes=outcomes, stop_reason=stop, num_turns=len(state.turns),
                                        best_speedup=state.best_speedup)
            try:
                outcome = self.take_turn(state, context, messages)
            except ContextOverflowError as exc:  # the provider's count beat ours: same stop rule
                log.info("context overflow reported by the provider: %s", exc)
                return TrajectoryResult(outcomes=outcomes, stop_reason=StopReason.CONTEXT_OVERFLOW,
                                        num_turns=len(state.turns), best_speedup=state.best_speedup)
            if observer is not None:
                observer(outcome)
            outcomes.append(outcome)
            state = state.with_turn(PriorTurn(
                response_text=outcome.reply.text, feedback=outcome.feedback,
                status=outcome.evaluation.status, speedup=outcome.evaluation.speedup,
            ))
