"""Fake model client and evaluator for the agent-loop tests (no I/O, fully scripted)."""

from __future__ import annotations

from collections.abc import Callable

from ptxcore.agent import CallContext, LLMReply, TurnEvaluation
from ptxcore.schema import (
    CompileResult,
    CompileStatus,
    EvaluationStatus,
    JudgeCorrectness,
    JudgeResult,
    LLMUsage,
    Performance,
    TargetInstruction,
    TargetInstructionEvidence,
)


def kernel_answer(tag: str) -> str:
    return f"Attempt {tag}.\n```cpp\n// kernel {tag}\nvoid run() {{}}\n```\n"


class FakeLLM:
    """Serves `answers` in order (the last repeats) and records every call's messages and context."""

    def __init__(self, answers: list[str], window: int | None = None, overflow_at_call: int | None = None) -> None:
        self.answers = answers
        self.window = window
        self.overflow_at_call = overflow_at_call
        self.calls: list[tuple[list[dict[str, str]], CallContext]] = []

    def complete(self, messages: list[dict[str, str]], context: CallContext) -> LLMReply:
        from ptxcore.agent import ContextOverflowError

        if self.overflow_at_call is not None and len(self.calls) == self.overflow_at_call:
            raise ContextOverflowError("prompt is too long")
        self.calls.append(([dict(m) for m in messages], context))
        text = self.answers[min(len(self.calls) - 1, len(self.answers) - 1)]
        return LLMReply(text=text, usage=LLMUsage(prompt_tokens=self.count_tokens(messages), completion_tokens=10))

    def context_window_tokens(self) -> int | None:
        return self.window

    def count_tokens(self, messages: list[dict[str, str]]) -> int:
        return sum(len(m["content"]) for m in messages) // 4


def compiled(source: str = "x") -> CompileResult:
    return CompileResult(status=CompileStatus.COMPILED, source_sha256="0" * 64, arch="hopper")


def passed(speedup: float) -> TurnEvaluation:
    judge = JudgeResult(
        status=EvaluationStatus.PASSED, definition="gemm_n7168_k5120", arch="hopper",
        target_instruction=TargetInstructionEvidence(status=TargetInstruction.EXECUTED),
        correctness=JudgeCorrectness(max_absolute_error=0.0),
        performance=Performance(latency_ms=1.0 / speedup, reference_latency_ms=1.0, speedup_factor=speedup),
    )
    return TurnEvaluation(status=EvaluationStatus.PASSED, compile=compiled(), judge=judge,
                          target_instruction=TargetInstruction.EXECUTED, speedup=speedup, gpu="Fake")


def failed(status: EvaluationStatus = EvaluationStatus.INCORRECT_NUMERICAL) -> TurnEvaluation:
    return TurnEvaluation(status=status, compile=compiled())


class FakeEvaluator:
    """Verdicts by call order, or computed from the source by `rule`."""

    def __init__(self, verdicts: list[TurnEvaluation] | None = None,
                 rule: Callable[[str], TurnEvaluation] | None = None) -> None:
        self.verdicts = verdicts or []
        self.rule = rule
        self.sources: list[str] = []

    def evaluate(self, source: str, context: CallContext) -> TurnEvaluation:
        self.sources.append(source)
        if self.rule is not None:
            return self.rule(source)
        return self.verdicts[min(len(self.sources) - 1, len(self.verdicts) - 1)]
