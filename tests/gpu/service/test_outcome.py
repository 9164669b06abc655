"""Who is to blame: candidate verdicts vs excluded infrastructure attempts."""

from __future__ import annotations

import signal

from ptxcore.gpu.service.health import HealthVerdict
from ptxcore.gpu.service.models import GpuCondition, TaskKind, WorkItem
from ptxcore.gpu.service.outcome import Action, classify
from ptxcore.gpu.service.runner import Phase
from ptxcore.gpu.service.worker import OutcomeKind, RunOutcome
from ptxcore.schema import EnvironmentInfo, EvaluationStatus

from .results import scripted_result

ITEM = WorkItem(task_id="t" * 32, kind=TaskKind.EVALUATE, definition="gemm_n7168_k5120", arch="hopper",
                source="x", source_sha256="0" * 64, timeout_s=5)
HEALTHY = HealthVerdict(GpuCondition.HEALTHY, ())
HOT = HealthVerdict(GpuCondition.HOT, ("temperature 95 C >= 85 C",))
DRAINING = ["hw_thermal_slowdown"]


def result(status=EvaluationStatus.PASSED, throttle=()):
    r = scripted_result(ITEM, status, "")
    return r.model_copy(update={"environment": EnvironmentInfo(throttle_reasons=list(throttle))})


def test_verdicts_are_scored_as_returned():
    for status in (EvaluationStatus.PASSED, EvaluationStatus.INCORRECT_NUMERICAL, EvaluationStatus.RUNTIME_ERROR,
                   EvaluationStatus.TIMEOUT, EvaluationStatus.REWARD_HACK, EvaluationStatus.COMPILE_ERROR):
        d = classify(RunOutcome(OutcomeKind.RESULT, Phase.HARNESS, result(status)), ITEM, HEALTHY, DRAINING)
        assert d.action is Action.SCORE and d.result.status is status and not d.replace_worker


def test_infra_error_and_unhealthy_or_throttled_attempts_are_excluded():
    infra = classify(RunOutcome(OutcomeKind.RESULT, Phase.HARNESS, result(EvaluationStatus.INFRA_ERROR)),
                     ITEM, HEALTHY, DRAINING)
    hot = classify(RunOutcome(OutcomeKind.RESULT, Phase.HARNESS, result()), ITEM, HOT, DRAINING)
    throttled = classify(RunOutcome(OutcomeKind.RESULT, Phase.HARNESS, result(throttle=["hw_thermal_slowdown"])),
                         ITEM, HEALTHY, DRAINING)
    power = classify(RunOutcome(OutcomeKind.RESULT, Phase.HARNESS, result(throttle=["sw_power_cap"])),
                     ITEM, HEALTHY, DRAINING)
    assert infra.action is hot.action is throttled.action is Action.RETRY
    assert "95 C" in hot.reason and "hw_thermal_slowdown" in throttled.reason
    assert power.action is Action.SCORE


def test_hang_blame_follows_the_phase():
    cand = classify(RunOutcome(OutcomeKind.HUNG, Phase.CANDIDATE), ITEM, HEALTHY, DRAINING)
    ours = classify(RunOutcome(OutcomeKind.HUNG, Phase.HARNESS), ITEM, HEALTHY, DRAINING)
    assert cand.action is Action.SCORE and cand.result.status is EvaluationStatus.TIMEOUT and cand.replace_worker
    assert ours.action is Action.RETRY and ours.result.status is EvaluationStatus.INFRA_ERROR and ours.replace_worker
    hot = classify(RunOutcome(OutcomeKind.HUNG, Phase.CANDIDATE), ITEM, HOT, DRAINING)
    assert hot.action is Action.RETRY


def test_death_blame_follows_phase_signal_and_health():
    segv = RunOutcome(OutcomeKind.DIED, Phase.CANDIDATE, exit_signal=signal.SIGSEGV)
    d = classify(segv, ITEM, HEALTHY, DRAINING)
    assert d.action is Action.SCORE and d.result.status is EvaluationStatus.RUNTIME_ERROR and "SIGSEGV" in d.reason
    exit_code = RunOutcome(OutcomeKind.DIED, Phase.CANDIDATE, exit_signal=None)
    assert classify(exit_code, ITEM, HEALTHY, DRAINING).result.status is EvaluationStatus.RUNTIME_ERROR
    killed = RunOutcome(OutcomeKind.DIED, Phase.CANDIDATE, exit_signal=signal.SIGKILL)
    assert classify(killed, ITEM, HEALTHY, DRAINING).action is Action.RETRY
    harness = RunOutcome(OutcomeKind.DIED, Phase.HARNESS, exit_signal=signal.SIGSEGV)
    assert classify(harness, ITEM, HEALTHY, DRAINING).action is Action.RETRY
    assert classify(segv, ITEM, HOT, DRAINING).action is Action.RETRY


def test_engine_exception_is_ours():
    d = classify(RunOutcome(OutcomeKind.ENGINE_ERROR, Phase.HARNESS, detail="boom"), ITEM, HEALTHY, DRAINING)
    assert d.action is Action.RETRY and d.replace_worker and "boom" in d.reason
