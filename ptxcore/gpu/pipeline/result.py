"""Assembling a JudgeResult while the stages of a judgement run (the judge and the service's tool-only
tasks use the same builder)."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from ptxcore.gpu.errors import InfraError
from ptxcore.schema import (
    CompileResult,
    CorrectnessStats,
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

if TYPE_CHECKING:
    from ptxcore.gpu.pipeline.reference import ReferenceTiming
    from ptxcore.gpu.pipeline.session import SessionOutcome

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
        self.verdict_started: float | None = None
        """When the candidate's session ended (monotonic s): `finish` records the stage `verdict` from there."""

    def stage(self, name: str, seconds: float) -> None:
        """Add wall seconds to a stage (stages may be entered more than once)."""
        self.stages[name] = round(self.stages.get(name, 0.0) + seconds, 6)

    def finish(self, status: EvaluationStatus, reason: str, log: str = "",
               target: TargetInstructionEvidence | None = None) -> JudgeResult:
        """The record. Without evidence, the static SASS says what is known (fold rule 2)."""
        now = time.monotonic()
        if self.verdict_started is not None:
            self.stage("verdict", now - self.verdict_started)
        self.stage("total", now - self.started)
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


def record_performance(r: ResultBuilder, out: SessionOutcome, ref: ReferenceTiming) -> None:
    """The speedup of a correct candidate against its reference (InfraError when CUPTI saw no kernel time)."""
    if out.latency_ms <= 0:
        raise InfraError("CUPTI recorded no kernel time for a correct candidate")
    r.performance = Performance(latency_ms=out.latency_ms, reference_latency_ms=ref.latency_ms,
                                speedup_factor=ref.latency_ms / out.latency_ms)


def record_session(r: ResultBuilder, out: SessionOutcome) -> None:
    """What a session observed: its audit, stage times, correctness statistics and the timing environment."""
    r.timing_audit = out.audit
    for k, v in out.stage_seconds.items():
        r.stage(k, v)
    r.stage("kernel", out.kernel_seconds)
    r.correctness = _correctness(out)
    clocks = [t.clocks_mhz for t in out.trials]
    temps = [t.temps_c for t in out.trials]
    r.environment = r.environment.model_copy(update={
        "sm_clock_mhz_before": clocks[0][0] if clocks else None, "sm_clock_mhz_after": clocks[-1][1] if clocks else None,
        "temperature_c_before": temps[0][0] if temps else None, "temperature_c_after": temps[-1][1] if temps else None,
        "throttle_reasons": sorted({x for t in out.trials for x in t.throttle_reasons}),
        "env_stream_ids": list(out.env_streams), "trial_medians_ms": [t.median_ms for t in out.trials],
        "persisting_l2_resets": out.l2_resets})


def _correctness(out: SessionOutcome) -> JudgeCorrectness | None:
    checked = [r for r in out.correctness if r.stats is not None]
    if not checked:
        return None
    s = checked[0].stats
    for rec in checked[1:]:
        s = s.merge(rec.stats)
    timed = [r for r in out.timed if r.stats is not None]
    stats = CorrectnessStats(
        trials=len(checked), matched_ratio=s.matched_ratio, allclose=s.allclose, mismatched=s.mismatched,
        numel=s.numel, nan_count=s.nan_count, inf_count=s.inf_count, timed_calls_verified=len(timed),
        timed_calls_passed=sum(1 for r in timed if r.stats.mismatched == 0 and r.stats.nan_count == 0))
    return JudgeCorrectness(max_relative_error=s.max_rel_error, max_absolute_error=s.max_abs_error, stats=stats,
                            arbitrations=list(out.arbitrations))
