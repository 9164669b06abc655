"""Fakes of the environment tests: a recorder that keeps what it is given, a prompt, an evaluator by source."""

from __future__ import annotations

import threading

from ptxcore.agent import TurnEvaluation
from ptxcore.agent.plan import TrajectoryPlan
from ptxcore.gym import EnvSpec, EnvStepRecord, KernelEnv, Prompt, RewardSpec
from ptxcore.schema import EvaluationStatus, TrajectoryRecord, TurnRecord
from tests.agent.fakes import FakeEvaluator, failed, kernel_answer, passed

PROMPT = Prompt(system="You write kernels.", user='Task: {"name": "gemm_n7168_k5120"}', sha256="p" * 64)


class MemoryRecorder:
    """Keeps episodes (last record per trajectory), turns and steps in memory."""

    def __init__(self) -> None:
        self.episodes: dict[str, TrajectoryRecord] = {}
        self.turns: list[TurnRecord] = []
        self.steps: list[EnvStepRecord] = []
        self.specs: set[str] = set()
        self._lock = threading.Lock()

    def record_episode(self, plan: TrajectoryPlan, record: TrajectoryRecord, spec: RewardSpec) -> None:
        with self._lock:
            self.episodes[record.trajectory_id] = record
            self.specs.add(spec.sha256)

    def record_step(self, plan: TrajectoryPlan, turn: TurnRecord, step: EnvStepRecord) -> None:
        with self._lock:
            self.turns.append(turn)
            self.steps.append(step)


def verdict_by_source(source: str) -> TurnEvaluation:
    """`// kernel fast` passes at 2x, `// kernel hack` is a reward hack, anything else is wrong."""
    if "fast" in source:
        return passed(2.0)
    if "hack" in source:
        return failed(EvaluationStatus.REWARD_HACK)
    return failed()


def make_env(recorder: MemoryRecorder | None = None, **spec: object) -> tuple[KernelEnv, FakeEvaluator]:
    evaluator = FakeEvaluator(rule=verdict_by_source)
    fields = {"problem": "gemm_n7168_k5120", "run_id": "rl-test", "policy_model": "policy/test", **spec}
    return KernelEnv(EnvSpec.model_validate(fields), evaluator, PROMPT, recorder=recorder), evaluator


__all__ = ["MemoryRecorder", "make_env", "kernel_answer", "verdict_by_source", "PROMPT"]
