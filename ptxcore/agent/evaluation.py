"""Fold the CPU compile stage and the GPU judge into one turn verdict."""

from __future__ import annotations

from ptxcore.schema import (
    CompileResult,
    CompileStatus,
    EvaluationStatus,
    JudgeResult,
    SassReport,
    StaticTarget,
    TargetInstruction,
)

from .types import SolutionLanguage, TurnEvaluation

JUDGED_LANGUAGES = frozenset({SolutionLanguage.CUDA})
"""Languages the compile stage and the GPU judge can build. Triton solutions are not judged yet."""

_COMPILE_VERDICT = {
    CompileStatus.COMPILE_ERROR: EvaluationStatus.COMPILE_ERROR,
    CompileStatus.REJECTED: EvaluationStatus.REJECTED,
}


def compile_verdict(compile: CompileResult, sass: SassReport | None = None) -> TurnEvaluation | None:
    """The final verdict when the kernel did not build (no judge runs); None when it compiled."""
    status = _COMPILE_VERDICT.get(compile.status)
    if status is None:
        return None
    return TurnEvaluation(status=status, compile=compile, sass=sass)


def language_verdict(language: SolutionLanguage) -> TurnEvaluation | None:
    """NOT_EVALUATED for a language the judge cannot build (never a COMPILE_ERROR charged to the model);
    None when the kernel should go through compile and judge."""
    if language in JUDGED_LANGUAGES:
        return None
    return TurnEvaluation(status=EvaluationStatus.NOT_EVALUATED)


def static_target(sass: SassReport | None) -> TargetInstruction:
    """What is known without running: absent when the families are not in the binary, else unknown."""
    if sass is not None and sass.target_static is StaticTarget.ABSENT:
        return TargetInstruction.ABSENT
    return TargetInstruction.UNKNOWN


def fold_evaluation(compile: CompileResult, sass: SassReport | None, judge: JudgeResult | None) -> TurnEvaluation:
    """One verdict from the compile stage and (for compiled kernels) the judge envelope."""
    early = compile_verdict(compile, sass)
    if early is not None:
        return early
    if judge is None:
        raise ValueError("a compiled kernel needs a judge result")
    target = judge.target_instruction.status
    if judge.status is EvaluationStatus.NOT_EVALUATED and target is TargetInstruction.UNKNOWN:
        target = static_target(sass or judge.sass)
    speedup = None
    if judge.status is EvaluationStatus.PASSED and judge.performance is not None:
        speedup = judge.performance.speedup_factor
    return TurnEvaluation(
        status=judge.status, compile=compile, sass=sass or judge.sass, judge=judge,
        target_instruction=target, speedup=speedup, gpu=judge.environment.gpu_name,
        environment=judge.environment,
    )
