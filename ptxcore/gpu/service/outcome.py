"""Who is to blame for an attempt, and what happens to it: score the verdict, or exclude and retry.

Rules (pure function, tested):
- a returned verdict is scored, unless it is INFRA_ERROR, or the GPU was found unhealthy right after
  it (a thermal or clock problem distorts timing), or the judge saw draining throttle reasons while
  timing: then the attempt is excluded and the task retried elsewhere;
- a worker that hangs or dies while the candidate's own code runs in it (phase CANDIDATE) yields the
  candidate's verdict, TIMEOUT or RUNTIME_ERROR, unless the GPU is unhealthy afterwards or the process
  was SIGKILLed (the OOM killer or an operator; not something a kernel does): then it is ours;
- a hang, death or exception in our own code (phase HARNESS) is an infrastructure failure.
"""

from __future__ import annotations

import signal
from dataclasses import dataclass
from enum import StrEnum

from ptxcore.gpu.service.health import HealthVerdict
from ptxcore.gpu.service.models import WorkItem
from ptxcore.gpu.service.runner import Phase
from ptxcore.gpu.service.worker import OutcomeKind, RunOutcome
from ptxcore.schema import EvaluationStatus, JudgeResult, TargetInstruction, TargetInstructionEvidence


class Action(StrEnum):
    SCORE = "score"
    RETRY = "retry"
    """Exclude this attempt (never scored) and try again, elsewhere when possible."""


@dataclass(frozen=True)
class Decision:
    action: Action
    reason: str
    result: JudgeResult | None = None
    """The verdict to score (SCORE), or the INFRA_ERROR record to keep if retries run out (RETRY)."""
    replace_worker: bool = False
    """The worker process is gone or suspect: start a fresh one."""


def verdict_result(item: WorkItem, status: EvaluationStatus, reason: str, log: str = "") -> JudgeResult:
    """A JudgeResult made by the service itself (the judge never returned one)."""
    return JudgeResult(
        status=status, reason=reason, definition=item.definition, workload_uuid=item.workload_uuid,
        arch=item.arch, log=log[-2000:],
        target_instruction=TargetInstructionEvidence(
            status=TargetInstruction.UNKNOWN, reason="not reached", source_sha256=item.source_sha256),
    )


def _signal_name(sig: int | None) -> str:
    if sig is None:
        return "exit"
    try:
        return signal.Signals(sig).name
    except ValueError:
        return f"signal {sig}"


def _retry(item: WorkItem, reason: str, replace: bool) -> Decision:
    return Decision(Action.RETRY, reason, verdict_result(item, EvaluationStatus.INFRA_ERROR, reason), replace)


def classify(outcome: RunOutcome, item: WorkItem, after: HealthVerdict | None,
             draining_reasons: list[str]) -> Decision:
    """Decide one attempt. `after`: the health verdict taken right after it (None: not taken)."""
    unhealthy = after is not None and after.drains
    if outcome.kind is OutcomeKind.RESULT:
        result = outcome.result
        if result.status is EvaluationStatus.INFRA_ERROR:
            return Decision(Action.RETRY, f"judge infrastructure error: {result.reason}", result)
        if unhealthy:
            return _retry(item, "GPU unhealthy after the attempt: " + "; ".join(after.reasons), False)
        throttled = [r for r in result.environment.throttle_reasons if r in draining_reasons]
        if throttled:
            return _retry(item, "clocks throttled while timing: " + ", ".join(throttled), False)
        return Decision(Action.SCORE, "", result)
    if outcome.kind is OutcomeKind.ENGINE_ERROR:
        return _retry(item, f"judge raised: {outcome.detail}", True)
    candidate = outcome.phase is Phase.CANDIDATE
    if outcome.kind is OutcomeKind.HUNG:
        if candidate and not unhealthy:
            reason = f"candidate did not finish within {item.timeout_s:g} s (worker killed)"
            return Decision(Action.SCORE, reason, verdict_result(item, EvaluationStatus.TIMEOUT, reason), True)
        return _retry(item, f"worker hung in {outcome.phase.value} code for {item.timeout_s:g} s", True)
    # DIED
    how = _signal_name(outcome.exit_signal)
    if candidate and not unhealthy and outcome.exit_signal != signal.SIGKILL:
        reason = f"the candidate ended the worker process ({how}) while running"
        return Decision(Action.SCORE, reason,
                        verdict_result(item, EvaluationStatus.RUNTIME_ERROR, reason, outcome.detail), True)
    return _retry(item, f"worker died ({how}) in {outcome.phase.value} code: {outcome.detail}"[:500], True)
