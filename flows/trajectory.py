"""One trajectory as a Prefect subflow: MiniPTXAgent driven through generate / compile / judge / record tasks.

The loop itself is ptxcore's; this module only adapts its two interfaces (model client, evaluator) and its
turn observer to Prefect tasks, so that every model call, build, judgement and record is a task run
named `<model> / <arch> / <variant> / <problem> / #<trajectory> / turn <t>`.
"""

from __future__ import annotations

import logging

from prefect import flow, task
from prefect.cache_policies import NO_CACHE
from prefect.runtime import flow_run

from ptxcore.agent import CallContext, LLMReply, MiniPTXAgent, PriorTurn, TrajectoryPlan, TurnEvaluation
from ptxcore.agent.evaluation import compile_verdict, fold_evaluation, language_verdict
from ptxcore.agent.records import now_iso, turn_record
from ptxcore.agent.types import LLMClient, TurnOutcome
from ptxcore.schema import StopReason, TrajectoryRecord
from tasks.compile import compile_kernel
from tasks.generate import generate
from tasks.judge import judge_kernel
from tasks.record import record_turn

from .limits import gpu_tag, llm_tag
from .runtime import CampaignRuntime, get_runtime

log = logging.getLogger(__name__)


def turn_label(plan: TrajectoryPlan, turn: int) -> str:
    return f"{plan.label} / turn {turn}"


class TaskLLM:
    """The model client, each call a `generate` task run tagged llm:<provider>."""

    def __init__(self, client: LLMClient, plan: TrajectoryPlan) -> None:
        self.client, self.plan = client, plan
        self._task = generate.with_options(tags=[llm_tag(plan.model.model)])

    def complete(self, messages: list[dict[str, str]], context: CallContext) -> LLMReply:
        return self._task(self.client, messages, context, label=turn_label(self.plan, context.turn))

    def context_window_tokens(self) -> int | None:
        return self.client.context_window_tokens()

    def count_tokens(self, messages: list[dict[str, str]]) -> int:
        return self.client.count_tokens(messages)


class TaskEvaluator:
    """compile task (CPU: nvcc, or the Triton validator), then — for kernels that passed it — the judge task
    tagged gpu:<arch>, both with the trajectory's language."""

    def __init__(self, runtime: CampaignRuntime, plan: TrajectoryPlan) -> None:
        self.plan = plan
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
        compiled = compile_kernel(source, self.plan.arch, label=label, language=language)
        early = compile_verdict(compiled.result, compiled.sass)
        if early is not None:
            return early
        judged = self._judge(self.backend, source, compiled, self.plan.problem, self.plan.arch, label=label,
                             language=language)
        return fold_evaluation(compiled.result, compiled.sass, judged)


def _flow_run_name() -> str:
    params = flow_run.parameters
    plan = params.get("plan")
    if isinstance(plan, dict):
        plan = TrajectoryPlan.model_validate(plan)
    return plan.label if isinstance(plan, TrajectoryPlan) else "trajectory"


def _final(plan: TrajectoryPlan, runtime: CampaignRuntime, **fields: object) -> TrajectoryRecord:
    earlier = runtime.trajectories.get(plan.trajectory_id)
    started = earlier.started_at if earlier is not None and earlier.started_at else now_iso()
    return plan.record(started_at=started, **fields)


@flow(name="trajectory", flow_run_name=_flow_run_name, validate_parameters=False, log_prints=False)
def trajectory_flow(plan: TrajectoryPlan, runtime_key: str) -> TrajectoryRecord:
    """Run (or resume) one trajectory; every turn is recorded before the next model call."""
    runtime = get_runtime(runtime_key)
    prompt = runtime.prompt_builder(plan)
    prior = [PriorTurn.from_record(r) for r in runtime.recorded.get(plan.trajectory_id, [])]
    agent = MiniPTXAgent(TaskLLM(runtime.clients[plan.model.name], plan), TaskEvaluator(runtime, plan), plan.agent,
                         augmenter=runtime.augmenter)
    runtime.writer.record_trajectory(_final(plan, runtime, num_turns=len(prior)))
    done = list(prior)

    def observe(outcome: TurnOutcome) -> None:
        record = turn_record(plan, outcome, prompt.sha256)
        record_turn(runtime.writer, record, label=turn_label(plan, outcome.turn))
        done.append(PriorTurn.from_record(record))

    try:
        result = agent.run(prompt.system, prompt.user, plan.call_context(), prior, observer=observe)
    except Exception:
        speedups = [t.speedup for t in done if t.speedup is not None]
        runtime.writer.record_trajectory(_final(
            plan, runtime, num_turns=len(done), stop_reason=StopReason.ERROR,
            best_speedup=max(speedups) if speedups else None, finished_at=now_iso()))
        raise
    final = _final(plan, runtime, num_turns=result.num_turns, stop_reason=result.stop_reason,
                   best_speedup=result.best_speedup, finished_at=now_iso())
    runtime.writer.record_trajectory(final)
    return final


@task(name="trajectory", task_run_name="trajectory {plan.trajectory_id}", cache_policy=NO_CACHE)
def run_trajectory(plan: TrajectoryPlan, runtime_key: str) -> TrajectoryRecord:
    """Runs the trajectory subflow on a task-runner thread (so trajectories overlap)."""
    return trajectory_flow(plan=plan, runtime_key=runtime_key)
