"""Assembling a JudgeResult while the stages of a judgement run (the judge and the service's tool-only
tasks use the same builder)."""

from __future__ import annotations

import time

from ptxcore.schema import (
    CompileResult,
    EnvironmentInfo,
    EvaluationStatus,
    JudgeCorrectness,
    JudgeResult,
    Performance,
    SanitizerSummary,
    SassReport,
    TargetInstructionEvidence,
    TimingAudit,
)

NOT_RUN = "not executed: the candidate was not run to completion"


class ResultBuilder:
    """The pieces of one JudgeResult, filled in stage by stage; `finish` folds them into the record."""

    def __init__(self, definition: str, workload: str | None, arch: str) -> None:
        self.definition, self.workload, self.arch = definition, workload, arch
        self.started = time.monotonic()
        self.compile: CompileResult | None = None
        self.sass: SassReport | None = None
        self.correctness: JudgeCorrectness | None = None
        self.performance: Performance | None = None
        self.sanitizer: SanitizerSummary | None = None
        self.environment = EnvironmentInfo()
        self.timing_audit: TimingAudit | None = None
        self.stages: dict[str, float] = {}

    def stage(self, name: str, seconds: float) -> None:
        """Add wall seconds to a stage (stages may be entered more than once)."""
        self.stages[name] = round(self.stages.get(name, 0.0) + seconds, 6)

    def finish(self, status: EvaluationStatus, reason: str, log: str = "",
               target: TargetInstructionEvidence | None = None) -> JudgeResult:
        """The record. Without evidence, the static SASS says what is known (fold rule 2)."""
        self.stage("total", time.monotonic() - self.started)
        if target is None:
            target = TargetInstructionEvidence.from_static(self.sass, NOT_RUN)
        return JudgeResult(
            status=status, reason=reason, definition=self.definition, workload_uuid=self.workload, arch=self.arch,
            correctness=self.correctness if status is not EvaluationStatus.NOT_EVALUATED else None,
            performance=self.performance if status is EvaluationStatus.PASSED else None,
            sanitizer=self.sanitizer, target_instruction=target, compile=self.compile, sass=self.sass,
            environment=self.environment, stage_seconds=self.stages, log=log[-4000:],
            timing_audit=self.timing_audit if status is not EvaluationStatus.NOT_EVALUATED else None,
        )
