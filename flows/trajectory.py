"""One trajectory as a Prefect subflow: MiniPTXAgent driven through generate / compile / judge / record tasks.

The loop itself is ptxcore's; this module only adapts its two interfaces (model client, evaluator) and its
turn observer to Prefect tasks, so that every model call, build, judgement and record is a task run
named `<campaign>: <model> / <arch> / <variant> / <problem> / #<trajectory> / turn <t>`. The compile, judge
and record runs end in Completed states named by their outcome (tasks/states.py); the trajectory's own run
ends in one named by its best verdict, with its stop reason and verdicts in the message, and leaves a table
of its turns as an artifact.
"""

from __future__ import annotations

import contextvars
import logging
from collections.abc import Callable
from typing import Any

from prefect import flow
from prefect.client.schemas.objects import StateDetails
from prefect.states import Completed, State
from prefect.utilities.annotations import quote

from ptxcore.agent import CallContext, LLMReply, MiniPTXAgent, PriorTurn, TrajectoryPlan, TurnEvaluation
from ptxcore.agent.evaluation import compile_verdict, fold_evaluation, language_verdict
from ptxcore.agent.records import now_iso, turn_record
from ptxcore.agent.types import LLMClient, TurnOutcome
from ptxcore.schema import StopReason, TrajectoryRecord, TurnRecord
from tasks.compile import compile_kernel
from tasks.generate import generate
from tasks.judge import judge_kernel
from tasks.record import record_turn

from .artifacts import publish_turn_table, trajectory_state
from .limits import gpu_tag, llm_tag
from .runtime import CampaignRuntime, get_runtime

log = logging.getLogger(__name__)

BODY_STARTED: contextvars.ContextVar[Callable[[], None] | None] = contextvars.ContextVar("body_started", default=None)
"""Called when a trajectory's flow body starts, i.e. once Prefect has created its run (flows/campaign.py)."""


def _signal_body_started() -> None:
    # A function, not the ContextVar itself, in the flow body: Prefect pickles the flow function by value when
    # it hands its context to a task worker, and a ContextVar cannot be pickled (a module function travels by name).
    started = BODY_STARTED.get()
    if started is not None:
        started()


def run_name(plan: TrajectoryPlan) -> str:
    """The trajectory's flow-run name: campaign id first, so two campaigns' runs tell apart in any list."""
    return f"{plan.campaign_id}: {plan.label}"


def turn_label(plan: TrajectoryPlan, turn: int) -> str:
    return f"{run_name(plan)} / turn {turn}"


class TaskChain:
    """Runs a trajectory's task calls in order and draws only the real dependencies.

    Prefect infers a task run's upstream runs from its arguments by object identity, and interned strings and
    enum members ("hopper", PASSED) are shared by every turn, so it would draw edges between unrelated runs.
    Every argument is therefore quoted (never inspected), and each run waits for the run before it (generate,
    compile, judge, record, next turn's generate): the graph shows the turn sequence and nothing else. Returns
    the task's result; a failure (after the task's own retries) raises as a plain call would."""

    def __init__(self) -> None:
        self.last: State | None = None

    def __call__(self, task: Any, *args: Any, **kwargs: Any) -> Any:
        state = task(*map(quote, args), **{k: quote(v) for k, v in kwargs.items()},
                     wait_for=[_edge(self.last)] if self.last is not None else None, return_state=True)
        self.last = state
        return state.result(_sync=True)


def _edge(state: State) -> State:
    """What the next task waits for: a completed state of the same run without its result (Prefect would look
    through the result for values shared with other runs, such as the empty string, and draw edges to them)."""
    details = StateDetails(task_run_id=state.state_details.task_run_id, flow_run_id=state.state_details.flow_run_id)
    return Completed(data=True, state_details=details)


class TaskLLM:
    """The model client, each call a `generate` task run tagged llm:<provider>."""

    def __init__(self, client: LLMClient, plan: TrajectoryPlan, chain: TaskChain) -> None:
        self.client, self.plan, self.chain = client, plan, chain
        self._task = generate.with_options(tags=[llm_tag(plan.model.model)])

    def complete(self, messages: list[dict[str, str]], context: CallContext) -> LLMReply:
        return self.chain(self._task, self.client, messages, context, label=turn_label(self.plan, context.turn))

    def context_window_tokens(self) -> int | None:
        return self.client.context_window_tokens()

    def count_tokens(self, messages: list[dict[str, str]]) -> int:
        return self.client.count_tokens(messages)


class TaskEvaluator:
    """compile task (CPU: nvcc, or the Triton validator), then — for kernels that passed it — the judge task
    tagged gpu:<arch>, both with the trajectory's language."""

    def __init__(self, runtime: CampaignRuntime, plan: TrajectoryPlan, chain: TaskChain) -> None:
        self.plan, self.chain = plan, chain
        self.backend = runtime.judges[plan.arch]
        cfg = runtime.config
        self._judge = judge_kernel.with_options(tags=[gpu_tag(plan.arch)], retries=cfg.judge_retries,
                                                retry_delay_seconds=cfg.judge_retry_delay_s)

    def evaluate(self, source: str, context: CallContext) -> TurnEvaluation:
        label = turn_label(self.plan, context.turn)
        unjudged = language_verdict(self.plan.language)
        if unjudged is not None:
            return unjudged
        language = self.plan.language
        compiled = self.chain(compile_kernel, source, self.plan.arch, label=label, language=language)
        early = compile_verdict(compiled.result, compiled.sass)
        if early is not None:
            return early
        judged = self.chain(self._judge, self.backend, source, compiled, self.plan.problem, self.plan.arch, label=label,
                            language=language)
        return fold_evaluation(compiled.result, compiled.sass, judged)


def _final(plan: TrajectoryPlan, runtime: CampaignRuntime, **fields: object) -> TrajectoryRecord:
    earlier = runtime.trajectories.get(plan.trajectory_id)
    started = earlier.started_at if earlier is not None and earlier.started_at else now_iso()
    return plan.record(started_at=started, **fields)


@flow(name="trajectory", validate_parameters=False, log_prints=False)
def trajectory_flow(plan: TrajectoryPlan, runtime_key: str) -> TrajectoryRecord:
    """Run (or resume) one trajectory; every turn is recorded before the next model call. Called with
    `with_options(flow_run_name=run_name(plan))` (flows/campaign.py)."""
    _signal_body_started()
    runtime = get_runtime(runtime_key)
    prompt = runtime.prompt_builder(plan)
    records: list[TurnRecord] = list(runtime.recorded.get(plan.trajectory_id, []))
    prior = [PriorTurn.from_record(r) for r in records]
    chain = TaskChain()
    agent = MiniPTXAgent(TaskLLM(runtime.clients[plan.model.name], plan, chain), TaskEvaluator(runtime, plan, chain),
                         plan.agent, augmenter=runtime.augmenter)
    runtime.writer.record_trajectory(_final(plan, runtime, num_turns=len(prior)))
    done = list(prior)

    def observe(outcome: TurnOutcome) -> None:
        record = turn_record(plan, outcome, prompt.sha256)
        chain(record_turn, runtime.writer, record, label=turn_label(plan, outcome.turn))
        done.append(PriorTurn.from_record(record))
        records.append(record)

    try:
        result = agent.run(prompt.system, prompt.user, plan.call_context(), prior, observer=observe)
    except Exception:
        speedups = [t.speedup for t in done if t.speedup is not None]
        runtime.writer.record_trajectory(_final(
            plan, runtime, num_turns=len(done), stop_reason=StopReason.ERROR,
            best_speedup=max(speedups) if speedups else None, finished_at=now_iso()))
        raise
    finally:
        publish_turn_table(plan, records)
    final = _final(plan, runtime, num_turns=result.num_turns, stop_reason=result.stop_reason,
                   best_speedup=result.best_speedup, finished_at=now_iso())
    runtime.writer.record_trajectory(final)
    return trajectory_state(final, records)  # type: ignore[return-value]
