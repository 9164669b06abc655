"""Fold the CPU compile stage and the GPU judge into one turn verdict.

The two fold rules themselves live on the schema types (`CompileStatus.verdict`, `StaticTarget.instruction`);
this module only applies them to a turn.
"""

from __future__ import annotations

from ptxcore.schema import (
    JUDGED_LANGUAGES,
    CompileResult,
    EvaluationStatus,
    JudgeResult,
    Language,
    SassReport,
    StaticTarget,
    TargetInstruction,
)

from .types import TurnEvaluation


def compile_verdict(compile: CompileResult, sass: SassReport | None = None) -> TurnEvaluation | None:
    """The final verdict when the kernel did not build (no judge runs); None when it compiled."""
    status = compile.verdict
    if status is None:
        return None
    return TurnEvaluation(status=status, compile=compile, sass=sass)


def language_verdict(language: Language) -> TurnEvaluation | None:
    """NOT_EVALUATED for a language nothing can judge (not in `JUDGED_LANGUAGES`; never a COMPILE_ERROR charged
    to the model); None when the kernel goes through compile and judge (CUDA and Triton)."""
    if Language(language) in JUDGED_LANGUAGES:
        return None
    return TurnEvaluation(status=EvaluationStatus.NOT_EVALUATED)


def fold_evaluation(compile: CompileResult, sass: SassReport | None, judge: JudgeResult | None) -> TurnEvaluation:
    """One verdict from the compile stage and (for compiled kernels) the judge envelope.

    The turn keeps one compile result: the judge's copy is dropped when the judge reused this very build
    (same content address); a judge that built elsewhere (a remote service) keeps its own."""
    early = compile_verdict(compile, sass)
    if early is not None:
        return early
    if judge is None:
        raise ValueError("a compiled kernel needs a judge result")
    if judge.compile is not None and judge.compile.cache_key == compile.cache_key:
        judge = judge.model_copy(update={"compile": None})
    target = judge.target_instruction.status
    if judge.status is EvaluationStatus.NOT_EVALUATED and target is TargetInstruction.UNKNOWN:
        static = sass or judge.sass  # nothing ran: what the binary proves is all there is (fold rule 2)
        target = StaticTarget.instruction(static.target_static if static is not None else None)
    speedup = None
    if judge.status is EvaluationStatus.PASSED and judge.performance is not None:
        speedup = judge.performance.speedup_factor
    return TurnEvaluation(
        status=judge.status, compile=compile, sass=sass or judge.sass, judge=judge,
        target_instruction=target, speedup=speedup, gpu=judge.environment.gpu_name,
        environment=judge.environment,
    )
