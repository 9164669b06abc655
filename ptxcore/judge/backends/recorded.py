"""Recorded verdicts: a GPU host's earlier verdicts, reused where nothing can judge now (route `recorded:PATH`).

A verdict is reused only when (kernel sha256, problem, workload, architecture) all match a trace of the
FlashInfer-Trace folder PATH (ptxcore.problems.traceset); the result then says so (`recorded`: where, on
which GPU and driver, when). Every other kernel gets what a machine without a GPU can say: the CPU stages
and NOT_EVALUATED. The CPU stages always run: a kernel the current rules reject is rejected, whatever was
recorded for it.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import TYPE_CHECKING

from ptxcore.judge.backends.none import NoGpuJudge
from ptxcore.judge.route import RouteError
from ptxcore.problems.traceset import TracedVerdict, read_traced_verdicts
from ptxcore.sass.credit import with_work
from ptxcore.schema import (
    CorrectnessStats,
    EnvironmentInfo,
    EvaluationStatus,
    JudgeCorrectness,
    JudgeResult,
    Language,
    RecordedVerdict,
    TargetInstructionEvidence,
    exception_line,
    text_sha256,
)

if TYPE_CHECKING:
    from ptxcore.arch import Architecture
    from ptxcore.compile import CompiledCandidate
    from ptxcore.gpu.config import JudgeConfig
    from ptxcore.problems import Problem

log = logging.getLogger(__name__)

Key = tuple[str, str, str, str]  # kernel sha256, definition, workload uuid, architecture


class RecordedJudge:
    def __init__(self, root: Path, verdicts: dict[Key, TracedVerdict], arch: str, config: JudgeConfig | None = None):
        self.root, self.verdicts, self.arch = root, verdicts, arch
        self.name = f"recorded:{root}"
        self._cpu = NoGpuJudge(f"no {arch} GPU here and no verdict recorded for this kernel in {root}", config)

    @classmethod
    def open(cls, path: str, arch: str, config: JudgeConfig | None = None) -> RecordedJudge:
        root = Path(path)
        if not root.is_dir():
            raise RouteError(f"judge route recorded:{path}: no such folder")
        try:
            rows = read_traced_verdicts(root)
        except ValueError as exc:
            raise RouteError(f"judge route recorded:{path}: {exc}") from exc
        index = {(v.kernel_sha256, v.trace.definition, v.trace.workload.uuid, v.arch): v
                 for v in rows if v.arch == arch and v.target_instruction is not None}
        log.info("recorded verdicts: %d for %s in %s", len(index), arch, root)
        return cls(root, index, arch, config)

    def judge(self, source: str, problem: Problem, arch: Architecture, *, compiled: CompiledCandidate | None = None,
              workload_uuid: str | None = None, language: Language = Language.CUDA) -> JudgeResult:
        started = time.monotonic()
        cpu = self._cpu.judge(source, problem, arch, compiled=compiled, workload_uuid=workload_uuid,
                              language=language)
        if cpu.compile is not None and cpu.compile.verdict is not None:
            return cpu  # rejected or not compiling today: that is the verdict
        hit = self.verdicts.get((text_sha256(source), problem.name, str(cpu.workload_uuid), arch.key))
        if hit is None:
            return cpu
        target = hit.target_instruction
        if target is not None and target.work is None:
            # recorded before work shares were kept: credited now from its own recorded counts, by the judge's rule
            target = with_work(target, problem, str(cpu.workload_uuid), arch)
        return _reused(hit, target, cpu, self.root, started)


def _reused(hit: TracedVerdict, target: TargetInstructionEvidence, cpu: JudgeResult, root: Path,
            started: float) -> JudgeResult:
    """The recorded verdict in this judgement's envelope. Its reason is the exception's own line of the recorded
    log (a trace keeps the log, not the reason); its stage times are this judgement's (the CPU stages and the
    look-up; the trace does not keep the GPU host's)."""
    ev, env = hit.trace.evaluation, hit.trace.evaluation.environment
    libs = dict(env.libs)
    facts = {k: libs.pop(k, "") for k in ("driver", "cuda", "torch", "env_stream_ids", "trial_medians_ms",
                                          "persisting_l2_resets")}
    environment = EnvironmentInfo(
        gpu_name=env.hardware, driver_version=facts["driver"] or None, cuda_toolkit=facts["cuda"] or None,
        torch_version=facts["torch"] or None, library_versions=libs,
        trial_medians_ms=[float(x) for x in facts["trial_medians_ms"].split(",") if x],
        env_stream_ids=[int(x) for x in facts["env_stream_ids"].split(",") if x],
        persisting_l2_resets=int(facts["persisting_l2_resets"]) if facts["persisting_l2_resets"] else None)
    correctness = None
    if ev.correctness is not None:
        stats = CorrectnessStats.model_validate(ev.correctness.extra) if ev.correctness.extra else None
        correctness = JudgeCorrectness(max_relative_error=ev.correctness.max_relative_error,
                                       max_absolute_error=ev.correctness.max_absolute_error, stats=stats)
    recorded = RecordedVerdict(source=str(root), trace_sha256=hit.trace_sha256, gpu_name=env.hardware,
                               driver_version=facts["driver"] or None, judged_at=ev.timestamp)
    passed = ev.status is EvaluationStatus.PASSED
    return JudgeResult(
        status=ev.status, reason="" if passed else exception_line(ev.log), definition=cpu.definition,
        workload_uuid=cpu.workload_uuid, arch=cpu.arch, correctness=correctness, performance=ev.performance,
        target_instruction=target, compile=cpu.compile, sass=cpu.sass, environment=environment,
        stage_seconds={**cpu.stage_seconds, "total": round(time.monotonic() - started, 6)},
        log="" if passed else ev.log, recorded=recorded)
