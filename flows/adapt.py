"""The adapt build as Prefect flows: `adapt-build` runs the recipe's steps (select, repair, pairs, reason,
export), each runnable alone; `adapt-repair` runs the repair trajectories through the campaign machinery
(flows.campaign.run_campaign: tag limits, writer, judge selection, fan-out, resume).

Every step reads what the earlier ones recorded in the warehouse and skips what is done, so rerunning a
build (same build id) repeats no model call and adds no row.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path

from prefect import flow
from prefect.futures import wait
from prefect.runtime import flow_run
from prefect.task_runners import ThreadPoolTaskRunner
from pydantic import Field

from ptxcore.adapt import (
    STEPS,
    AdaptError,
    BuildContext,
    ExportSummary,
    PairSummary,
    ReasonBook,
    SelectionSummary,
    SynthesisJob,
    load_recipe,
    resolve_counter,
)
from ptxcore.agent import CampaignConfig, CampaignConfigError, CampaignSummary
from ptxcore.agent.yamlfile import locate
from ptxcore.schema import FrozenModel
from ptxcore.warehouse import Warehouse
from tasks.adapt import (
    export_task,
    finish_repair_task,
    pairs_task,
    plan_repair_task,
    select_task,
    synthesize_task,
)

from .campaign import run_campaign
from .limits import ensure_limits, llm_tag
from .replay import make_client, make_client_check
from .runtime import Prompt

log = logging.getLogger(__name__)

StepListener = Callable[[str, int, int, str], None]
ADAPT_LISTENERS: list[StepListener] = []
"""Called with (step, units done, units planned or 0, last event); the CLI draws a bar per step."""


class ReasonSummary(FrozenModel):
    """What the reason step did."""

    calls: int = Field(ge=0)
    """Synthesizer calls made in this run."""
    statuses: dict[str, int]
    """This run's answers per status."""
    accepted_pairs: int = Field(ge=0)
    """Kept pairs that now have an accepted monologue."""
    pairs: int = Field(ge=0)
    """Kept pairs."""


class BuildSummary(FrozenModel):
    """A build run: where it lives and what each step reported."""

    build_id: str
    """Build."""
    warehouse: str
    """DuckDB file."""
    steps: list[str]
    """Steps run, in order."""
    selection: SelectionSummary | None = None
    """select."""
    repair: CampaignSummary | None = None
    """repair (the repair campaign's summary)."""
    pairs: PairSummary | None = None
    """pairs."""
    reason: ReasonSummary | None = None
    """reason."""
    export: ExportSummary | None = None
    """export."""


def _notify(step: str, done: int, total: int, last: str) -> None:
    for listener in list(ADAPT_LISTENERS):
        listener(step, done, total, last)


def build_context(recipe_path: str, warehouse: str | None = None, build_id: str | None = None) -> BuildContext:
    """The recipe, its build id and warehouse (default: runs/<first source campaign>/warehouse.duckdb)."""
    recipe, text = load_recipe(recipe_path)
    check_recipe_addresses(recipe, recipe_path, text)
    path = warehouse or recipe.warehouse or f"runs/{recipe.selection.source_campaigns[0]}/warehouse.duckdb"
    try:
        return BuildContext(build_id=build_id or recipe.name, recipe=recipe, recipe_text=text,
                            warehouse=str(Path(path).resolve()))
    except ValueError as exc:  # the recipe's name is checked by the recipe itself: this is the option
        raise AdaptError(f"--build-id {str(build_id)[:80]!r}: use letters, digits, '_', '-', '.' (at most 100)") from exc


def check_recipe_addresses(recipe, where: str, text: str) -> None:  # noqa: ANN001 - ptxcore.adapt.Recipe
    """The recipe's models (key variables, servers) and the teacher's judge routes, before any step runs: a recipe
    alone may not choose where a key or the profiler token is sent (ptxcore.agent.endpoints)."""
    from ptxcore.agent.endpoints import EndpointError, allowed_endpoints, check_route

    specs = [("synthesizer.model", recipe.synthesizer.model)]
    if recipe.teacher is not None:
        specs.append(("teacher.model", recipe.teacher.model))
    try:
        for key, spec in specs:
            make_client_check(spec, key)
        for arch, route in (recipe.teacher.profilers if recipe.teacher else {}).items():
            check_route(f"teacher.profilers.{arch}", route, allowed_endpoints())
    except (EndpointError, CampaignConfigError) as exc:
        message = str(exc)
        raise AdaptError(f"{locate(where, text, message.split(':', 1)[0])}: {message}") from None


def resolve_steps(ctx: BuildContext, steps: list[str] | None) -> list[str]:
    if not steps:
        return list(ctx.recipe.steps())
    for step in steps:
        if step not in STEPS:
            raise AdaptError(f"--steps: unknown step {step!r} (steps: {', '.join(STEPS)})")
        if step not in ctx.recipe.steps():
            raise AdaptError(f"--steps: a {ctx.recipe.template.value} recipe has no {step} step")
    return [s for s in STEPS if s in steps]


def _repair_config(config: CampaignConfig, mlflow_uri: str | None) -> CampaignConfig:
    updates: dict[str, object] = {}
    if mlflow_uri:
        updates["mlflow_tracking_uri"] = mlflow_uri
    return CampaignConfig.model_validate({**config.model_dump(mode="json"), **updates}) if updates else config


@flow(name="adapt-repair", flow_run_name="adapt repair {ctx.build_id}", validate_parameters=False, log_prints=False)
def repair_flow(ctx: BuildContext, profilers: dict[str, str] | None = None, mlflow_tracking_uri: str | None = None,
                judge_plugin: str | None = None) -> CampaignSummary:
    """One teacher trajectory per selected failure, through the campaign machinery; then record stop reasons."""
    plan = plan_repair_task(ctx)
    config = _repair_config(plan.config, mlflow_tracking_uri)
    prompts = {tid: Prompt(system=p.system, user=p.user, sha256=p.sha256) for tid, p in plan.prompts.items()}
    summary, _ = run_campaign(config, plan.config_text, plan.plans, judge_plugin,
                              prompt_builder=lambda trajectory: prompts[trajectory.trajectory_id], profilers=profilers,
                              new_id="--build-id NEW")
    finish_repair_task(ctx)
    return summary


def _run_jobs(jobs: list[SynthesisJob], book: ReasonBook, ctx: BuildContext, client, counter, step: str) -> list:
    """Submit the calls (at most the synthesizer's concurrency at once); record each answer as it arrives."""
    spec = ctx.recipe.synthesizer
    done: list = []
    if not jobs:
        return done
    task = synthesize_task.with_options(tags=[llm_tag(spec.model.model)])
    with ThreadPoolTaskRunner(max_workers=spec.model.concurrency) as runner:
        futures = {runner.submit(task, parameters={"client": client, "job": j, "spec": spec,
                                                   "label": f"{ctx.build_id} / {j.pair_id} / {j.kind.value}"}): j
                   for j in jobs}
        pending = list(futures)
        while pending:
            finished, not_done = wait(pending, timeout=2)
            for future in finished:
                record = book.record(futures[future], future.result(), counter)
                done.append(record)
                _notify(step, len(done), len(jobs), f"{record.pair_id}: {record.status.value}")
            pending = list(not_done)
    return done


def reason_step(ctx: BuildContext) -> ReasonSummary:
    """Synthesize missing monologues, then rewrite those whose rows exceed the token budget."""
    spec = ctx.recipe.synthesizer
    client = make_client(spec.model, "synthesizer.model")
    ensure_limits({llm_tag(spec.model.model): spec.model.concurrency})
    counter, note = resolve_counter(ctx.recipe.export.tokenizer)
    if note:
        log.info("%s", note)
    with Warehouse(ctx.warehouse) as wh:
        book = ReasonBook(wh, ctx)
        records = _run_jobs(book.synthesis_jobs(), book, ctx, client, counter, "reason")
        jobs, hopeless = book.resynthesis_jobs(counter)
        records += [book.record(None, h) for h in hopeless]
        records += _run_jobs(jobs, book, ctx, client, counter, "resynthesize")
        accepted = book.accepted_pairs()
    statuses: dict[str, int] = {}
    for r in records:
        statuses[r.status.value] = statuses.get(r.status.value, 0) + 1
    return ReasonSummary(calls=sum(bool(r.prompt_sha256) for r in records), statuses=statuses,
                         accepted_pairs=accepted, pairs=len(book.pairs))


def _flow_run_name() -> str:
    params = flow_run.parameters
    return f"adapt build {params.get('build_id') or Path(str(params.get('recipe_path', ''))).stem}"


@flow(name="adapt-build", flow_run_name=_flow_run_name, log_prints=False)
def adapt_build_flow(recipe_path: str, steps: list[str] | None = None, warehouse: str | None = None,
                     build_id: str | None = None, out_dir: str | None = None, profilers: dict[str, str] | None = None,
                     mlflow_tracking_uri: str | None = None, judge_plugin: str | None = None) -> BuildSummary:
    """Run (or resume) the recipe's steps; returns what each reported."""
    ctx = build_context(recipe_path, warehouse, build_id)
    todo = resolve_steps(ctx, steps)
    out = out_dir or str(Path(ctx.warehouse).parent / "adapt" / ctx.build_id)
    summary: dict[str, object] = {}
    for step in todo:
        _notify(step, 0, 0, "starting")
        if step == "select":
            summary["selection"] = select_task(ctx)
        elif step == "repair":
            summary["repair"] = repair_flow(ctx, profilers, mlflow_tracking_uri, judge_plugin)
        elif step == "pairs":
            summary["pairs"] = pairs_task(ctx)
        elif step == "reason":
            summary["reason"] = reason_step(ctx)
        else:
            summary["export"] = export_task(ctx, out)
        _notify(step, 1, 1, "done")
    return BuildSummary(build_id=ctx.build_id, warehouse=ctx.warehouse, steps=todo, **summary)
