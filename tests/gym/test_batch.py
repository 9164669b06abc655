"""EnvPool: many environments' steps at once, in order or as they finish; a timeout per step; failures returned."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from ptxcore.gym import StepResult
from ptxcore.gym.batch import EnvPool, FailureKind, StepFailure
from ptxcore.gym.judging import JudgeEvaluator, SlotGate
from ptxcore.judge import InfraFailure
from ptxcore.schema import (
    EvaluationStatus,
    JudgeResult,
    StopReason,
    TargetInstruction,
    TargetInstructionEvidence,
)
from tests.waiting import wait_for

from .fakes import MemoryRecorder, kernel_answer, make_env


class SlowEvaluator:
    """Sleeps `delay_s` per kernel whose source names `sleepy` (`started` is set as it begins); raises InfraFailure
    for `infra`."""

    def __init__(self, inner, delay_s: float) -> None:
        self.inner, self.delay_s = inner, delay_s
        self.started = threading.Event()

    def evaluate(self, source, context):
        if "sleepy" in source:
            self.started.set()
            time.sleep(self.delay_s)
        if "infra" in source:
            raise InfraFailure(JudgeResult(status=EvaluationStatus.INFRA_ERROR, reason="driver hiccup",
                                           definition="gemm_n7168_k5120", arch="hopper",
                                           target_instruction=TargetInstructionEvidence(
                                               status=TargetInstruction.UNKNOWN)))
        return self.inner.evaluate(source, context)


def envs(n: int, delay_s: float = 0.0, recorder=None):
    out = []
    for i in range(n):
        env, evaluator = make_env(recorder, policy_model=f"policy/p{i}")
        env.evaluator = SlowEvaluator(evaluator, delay_s)
        env.reset()
        out.append(env)
    return out


def test_step_many_keeps_order_and_returns_failures():
    a, b, c, d = envs(4)
    d.step(kernel_answer("fast"))  # d's episode is over
    with EnvPool(max_in_flight=4) as pool:
        out = pool.step_many([(a, kernel_answer("fast")), (b, kernel_answer("infra")), (c, "x" * 400_001),
                              (d, kernel_answer("fast"))])
    assert isinstance(out[0], StepResult) and out[0].info.status is EvaluationStatus.PASSED
    assert [o.kind for o in out[1:]] == [FailureKind.INFRA, FailureKind.INPUT, FailureKind.STATE]
    assert "driver hiccup" in out[1].message and out[1].index == 1
    assert not b.done  # an infrastructure failure takes no step: the same step may be repeated
    assert b.step(kernel_answer("fast")).info.turn == 0


def test_steps_run_concurrently():
    pool_envs = envs(8, delay_s=0.3)
    t0 = time.monotonic()
    with EnvPool(max_in_flight=8) as pool:
        out = pool.step_many([(e, kernel_answer("sleepy fast")) for e in pool_envs])
    assert all(isinstance(o, StepResult) for o in out)
    assert time.monotonic() - t0 < 0.3 * 8 / 2


def test_timeout_abandons_the_environment():
    from ptxcore.gym import EnvStateError

    recorder = MemoryRecorder()
    slow, quick = envs(2, delay_s=1.0, recorder=recorder)
    late: list[BaseException] = []
    step = slow.step

    def watched(completion, *args, **kwargs):
        try:
            return step(completion, *args, **kwargs)
        except EnvStateError as exc:
            late.append(exc)
            raise

    slow.step = watched
    with EnvPool(max_in_flight=2, step_timeout_s=0.2) as pool:
        out = pool.step_many([(slow, kernel_answer("sleepy")), (quick, kernel_answer("fast"))])
    assert isinstance(out[0], StepFailure) and out[0].kind is FailureKind.TIMEOUT
    assert isinstance(out[1], StepResult)
    assert recorder.episodes[slow.trajectory_id].stop_reason is StopReason.ERROR
    wait_for(lambda: late, 20, "the abandoned step to finish")  # late: its result is dropped, nothing recorded
    assert "abandoned while it ran" in str(late[0])
    assert [s.trajectory_id for s in recorder.steps] == [quick.trajectory_id]


def test_as_completed_yields_the_fast_step_first():
    slow, quick = envs(2, delay_s=0.5)

    async def collect():
        with EnvPool(max_in_flight=2) as pool:
            return [(i, o) async for i, o in pool.as_completed([(slow, kernel_answer("sleepy")),
                                                                (quick, kernel_answer("fast"))])]

    order = asyncio.run(collect())
    assert [i for i, _ in order] == [1, 0]
    assert all(isinstance(o, StepResult) for _, o in order)


def test_astep_timeout_counts_from_start_not_queue():
    a, b = envs(2, delay_s=0.3)

    async def both():
        with EnvPool(max_in_flight=1) as pool:  # b waits for a's thread: its wait is not its time
            return await asyncio.gather(pool.astep(a, kernel_answer("sleepy"), 0.6),
                                        pool.astep(b, kernel_answer("sleepy"), 0.6, index=1))

    assert all(isinstance(o, StepResult) for o in asyncio.run(both()))


def test_slot_gate_bounds_judgements_in_flight():
    inside, peak, lock = [0], [0], threading.Lock()

    class Backend:
        name = "counting"

        def judge(self, *args, **kwargs):
            with lock:
                inside[0] += 1
                peak[0] = max(peak[0], inside[0])
            time.sleep(0.05)
            with lock:
                inside[0] -= 1
            raise RuntimeError("stop here")

    gate = SlotGate({"hopper": 2}).gate("hopper")
    evaluator = JudgeEvaluator(Backend(), gate=gate)
    import ptxcore.gym.judging as judging
    from ptxcore.agent import CallContext
    from ptxcore.compile import CompiledCandidate

    original = judging.build_candidate
    judging.build_candidate = lambda *a, **k: CompiledCandidate(_compiled(), None, None)
    try:
        threads = [threading.Thread(target=_swallow, args=(evaluator, CallContext(
            problem="gemm_n7168_k5120", arch="hopper", prompt_variant="v"))) for _ in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        judging.build_candidate = original
    assert peak[0] == 2
    with pytest.raises(ValueError):
        SlotGate({"hopper": 0})


def _compiled():
    from tests.agent.fakes import compiled

    return compiled()


def _swallow(evaluator, ctx):
    try:
        evaluator.evaluate("x", ctx)
    except RuntimeError:
        pass


def test_reset_after_a_timeout_does_not_wait_for_the_late_step():
    (slow,) = envs(1, delay_s=1.0)
    with EnvPool(max_in_flight=2, step_timeout_s=0.1) as pool:
        out = pool.step_many([(slow, kernel_answer("sleepy"))])
        assert out[0].kind is FailureKind.TIMEOUT
        t0 = time.monotonic()
        slow.reset()
        assert time.monotonic() - t0 < 0.5
        assert isinstance(slow.step(kernel_answer("fast")), StepResult)  # the new episode steps at once


def test_a_second_step_while_one_runs_is_refused():
    from ptxcore.gym import EnvStateError

    (env,) = envs(1, delay_s=0.5)
    first: list = []
    runner = threading.Thread(target=lambda: first.append(env.step(kernel_answer("sleepy"))))
    runner.start()
    assert env.evaluator.started.wait(20), "the first step never reached its judgement"
    with pytest.raises(EnvStateError, match="in flight"):
        env.step(kernel_answer("fast"))
    runner.join()
    assert first[0].info.turn == 0 and env.step(kernel_answer("fast")).info.turn == 1
