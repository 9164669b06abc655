"""KernelEnv: the judge as a training environment, with reset / step over the agent's own protocol.

`reset(seed)` starts an episode and returns the first observation: the messages MiniPTXAgent sends on its first
call (system prompt of the variant, the problem's task). `step(completion)` is one agent turn with the policy's
completion as the model's answer: MiniPTXAgent.take_turn extracts the kernel exactly as a campaign does, the
evaluator compiles and judges it through the judge seam, the agent's feedback is the next observation, the
reward spec scores the verdict, and the agent's stop rules decide the end (target speedup: terminated; turn
budget: truncated). Every step is a TurnRecord plus an EnvStepRecord handed to the recorder, so an episode is a
trajectory of a campaign whose source is `environment`.

Thread-safe per environment: one step at a time (a second one while a step runs is refused). A step that a caller
gave up on (its timeout, ptxcore.gym.batch) is `abandon`ed: when it finishes late its result is dropped, and a reset
may start the next episode at once.
"""

from __future__ import annotations

import itertools
import logging
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Protocol

from ptxcore.agent.campaign import ModelSpec
from ptxcore.agent.loop import AgentState, MiniPTXAgent, PriorTurn, messages_for_turn, stop_rule
from ptxcore.agent.plan import TrajectoryPlan
from ptxcore.agent.records import now_iso, turn_record
from ptxcore.agent.types import CallContext, Evaluator, LLMReply
from ptxcore.schema import CompileStatus, LLMUsage, StopReason, TrajectoryRecord, TurnRecord

from .records import EnvStepRecord
from .reward import RewardFacts, RewardSpec, score
from .spec import EnvSpec
from .steps import Message, ResetResult, StepInfo, StepResult

log = logging.getLogger(__name__)

MAX_COMPLETION_CHARS = 400_000
"""Longest completion a step takes (a model's answer; the compile stage bounds what it builds far below this)."""


class EnvStateError(RuntimeError):
    """A call out of order: step before reset, step after the episode ended, or after an abandoned step."""


@dataclass(frozen=True)
class Prompt:
    """The assembled first messages of one (variant, problem)."""

    system: str
    user: str
    sha256: str


class StepRecorder(Protocol):
    """Where episodes and steps go (flows.env.EnvRecorder: the warehouse and MLflow, like a campaign's writer)."""

    def record_episode(self, plan: TrajectoryPlan, record: TrajectoryRecord, spec: RewardSpec) -> None: ...

    def record_step(self, plan: TrajectoryPlan, turn: TurnRecord, step: EnvStepRecord) -> None: ...


class _Completion:
    """The model client of one step: it answers with the policy's completion (MiniPTXAgent asks it once)."""

    def __init__(self, completion: str, usage: LLMUsage, reasoning: str, model: str) -> None:
        self.reply = LLMReply(text=completion, reasoning=reasoning, usage=usage, model=model)

    def complete(self, messages: list[Message], context: CallContext) -> LLMReply:
        return self.reply

    def context_window_tokens(self) -> int | None:
        return None

    def count_tokens(self, messages: list[Message]) -> int:
        return 0


@dataclass
class _Episode:
    plan: TrajectoryPlan
    seed: int
    state: AgentState
    started_at: str
    rewards: list[float]
    stop: StopReason | None = None
    broken: bool = False
    busy: bool = False


class KernelEnv:
    """One environment (module docstring). `episodes`: the counter that numbers episodes (shared by the
    environments of one run so that their trajectory ids never collide)."""

    def __init__(self, spec: EnvSpec, evaluator: Evaluator, prompt: Prompt, recorder: StepRecorder | None = None,
                 episodes: Iterator[int] | None = None) -> None:
        self.spec, self.evaluator, self.prompt, self.recorder = spec, evaluator, prompt, recorder
        self._episodes = episodes if episodes is not None else itertools.count()
        self._config = spec.agent_config()
        self._lock = threading.Lock()
        self._episode: _Episode | None = None

    # -- reset -----------------------------------------------------------------------------------------------
    def reset(self, seed: int = 0, policy_model: str | None = None) -> ResetResult:
        """Start an episode; the observation is the first call's messages. `seed` is recorded with every step
        (the judge's inputs are the problem's own seeded distributions, the same for every episode); `policy_model`
        changes the acting policy's id from this episode on."""
        if seed < 0:
            raise ValueError("seed must be >= 0")
        if policy_model is not None:  # from this episode on; validated like the spec's own
            self.spec = EnvSpec.model_validate({**self.spec.model_dump(), "policy_model": policy_model})
        plan = self._plan(self.spec, next(self._episodes))
        episode = _Episode(plan=plan, seed=seed, state=AgentState(system=self.prompt.system, user=self.prompt.user),
                           started_at=now_iso(), rewards=[])
        with self._lock:
            self._episode = episode
        if self.recorder is not None:
            self.recorder.record_episode(plan, plan.record(started_at=episode.started_at), self.spec.reward)
        return ResetResult(observation=self._messages(episode.state), trajectory_id=plan.trajectory_id,
                           prompt_sha256=self.prompt.sha256, reward_spec_sha256=self.spec.reward.sha256)

    def _plan(self, spec: EnvSpec, index: int) -> TrajectoryPlan:
        model = ModelSpec(model=spec.policy_model)
        return TrajectoryPlan(
            campaign_id=spec.run_id, model=model, arch=spec.arch, prompt_variant=spec.prompt_variant,
            problem=spec.problem, index=index, language=spec.language, agent=self._config,
            trajectory_id=f"{model.name}/{spec.arch}/{spec.prompt_variant}/{spec.problem}/{index}")

    def _messages(self, state: AgentState) -> list[Message]:
        return messages_for_turn(state, self._config)

    def call_context(self) -> CallContext:
        """Who the policy's next call is for (problem, arch, variant, episode index, turn), as the agent passes it."""
        episode = self._current()
        return episode.plan.call_context(len(episode.state.turns))

    @property
    def trajectory_id(self) -> str | None:
        return self._episode.plan.trajectory_id if self._episode is not None else None

    @property
    def done(self) -> bool:
        episode = self._episode
        return episode is None or episode.stop is not None or episode.broken

    # -- step ------------------------------------------------------------------------------------------------
    def _current(self) -> _Episode:
        episode = self._episode
        if episode is None:
            raise EnvStateError("step before reset: call reset(seed) first")
        if episode.broken:
            raise EnvStateError("an earlier step of this episode was abandoned (timed out): call reset(seed)")
        if episode.stop is not None:
            raise EnvStateError(f"the episode ended ({episode.stop.value}): call reset(seed)")
        return episode

    def step(self, completion: str, usage: LLMUsage | None = None, reasoning: str = "") -> StepResult:
        """One turn with `completion` as the model's answer (module docstring). An infrastructure failure
        raises (InfraFailure, ProfilerUnavailable, ...): the step is not taken and may be repeated."""
        if len(completion) > MAX_COMPLETION_CHARS:
            raise ValueError(f"completion of {len(completion)} characters: at most {MAX_COMPLETION_CHARS}")
        with self._lock:
            episode = self._current()
            if episode.busy:
                raise EnvStateError("a step of this episode is in flight: one step at a time")
            episode.busy = True
        started = time.monotonic()
        try:
            ctx = episode.plan.call_context(len(episode.state.turns))
            agent = MiniPTXAgent(_Completion(completion, usage or LLMUsage(), reasoning, episode.plan.model.model),
                                 self.evaluator, self._config)
            outcome = agent.take_turn(episode.state, ctx, agent.next_messages(episode.state))
        finally:
            episode.busy = False
        with self._lock:
            if episode.broken or self._episode is not episode:
                raise EnvStateError("the step was abandoned while it ran (timed out): its result is dropped")
            record = turn_record(episode.plan, outcome, self.prompt.sha256)
            return self._commit(episode, record, time.monotonic() - started)

    def _commit(self, episode: _Episode, record: TurnRecord, step_s: float) -> StepResult:
        reward = score(self.spec.reward, reward_facts(record))
        episode.state = episode.state.with_turn(PriorTurn.from_record(record))
        episode.rewards.append(reward.total)
        stop = stop_rule(episode.state.turns, self._config)
        terminated, truncated = stop is StopReason.TARGET_REACHED, stop is StopReason.MAX_TURNS
        step = EnvStepRecord.of(record.key, policy_model=episode.plan.model.model, seed=episode.seed,
                                spec=self.spec.reward, reward=reward, terminated=terminated, truncated=truncated,
                                step_s=step_s, created_at=record.created_at)
        if self.recorder is not None:
            self.recorder.record_step(episode.plan, record, step)
        episode.stop = stop
        if stop is not None:
            self._finish(episode, stop)
        log.info("%s step %d: %s, reward %.3f%s", episode.plan.trajectory_id, record.turn, record.status.value,
                 reward.total, f" ({stop.value})" if stop else "")
        return StepResult(
            observation={"role": "user", "content": record.feedback}, reward=reward.total, terminated=terminated,
            truncated=truncated, next_messages=[] if stop else self._messages(episode.state),
            info=StepInfo.of(record, reward, stop, step_s))

    def _finish(self, episode: _Episode, stop: StopReason) -> None:
        if self.recorder is None:
            return
        self.recorder.record_episode(episode.plan, self._trajectory(episode, stop), self.spec.reward)

    def _trajectory(self, episode: _Episode, stop: StopReason) -> TrajectoryRecord:
        return episode.plan.record(started_at=episode.started_at, num_turns=len(episode.state.turns),
                                   stop_reason=stop, best_speedup=episode.state.best_speedup, finished_at=now_iso())

    def abandon(self) -> None:
        """Give up on the step in flight (its caller timed out): the episode ends as ERROR and needs a reset."""
        episode = self._episode
        if episode is None or episode.broken or episode.stop is not None:
            return
        episode.broken = True
        if self.recorder is not None:
            self.recorder.record_episode(episode.plan, self._trajectory(episode, StopReason.ERROR), self.spec.reward)

    @property
    def rewards(self) -> list[float]:
        """The rewards of the current episode's steps, in order."""
        return list(self._episode.rewards) if self._episode is not None else []


def reward_facts(record: TurnRecord) -> RewardFacts:
    """What the reward formula reads of a recorded turn (each a warehouse column of it)."""
    return RewardFacts(
        status=record.status, compiled=record.compile is not None and record.compile.status is CompileStatus.COMPILED,
        target_instruction=record.target_instruction, target_work=record.target_work, speedup=record.speedup,
        recorded=record.judge is not None and record.judge.recorded is not None)
