"""The adapt build as Prefect flows: `adapt-build` runs the recipe's steps (select, repair, pairs, notes, reason,
export), each runnable alone; `adapt-repair` runs the repair trajectories through the campaign machinery
(flows.campaign.run_campaign: tag limits, writer, judge selection, fan-out, resume).

Every step reads what the earlier ones recorded in the warehouse and skips what is done, so rerunning a
build (same build id) repeats no model call and adds no row.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

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
    SelectionOutcome,
    SelectionSummary,
    SynthesisJob,
    load_recipe,
    resolve_counter,
)
from ptxcore.adapt.notes import NotesSummary
from ptxcore.adapt.store import AdaptStore
from ptxcore.agent import CampaignConfig, CampaignConfigError, CampaignSummary
from ptxcore.agent.yamlfile import locate
from ptxcore.schema import FrozenModel
from ptxcore.warehouse import Warehouse
from tasks.adapt import (
    export_task,
    finish_repair_task,
    notes_task,
    pairs_task,
    plan_repair_task,
    select_task,
    synthesize_task,
)

from .campaign import run_campaign
from .limits import ensure_limits, llm_tag
from .replay import make_client, make_client_check
from .runtime import Prompt

if TYPE_CHECKING:
    from ptxcore.adapt import Recipe

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
    notes: NotesSummary | None = None
    """notes (the repair-notes corpus)."""
    reason: ReasonSummary | None = None
    """reason."""
    export: ExportSummary | None = None
    """export."""
    stopped: str | None = None
    """Why the build stopped before its last step (one line); None when every step ran."""


def _notify(step: str, done: int, total: int, last: str) -> None:
    for listener in list(ADAPT_LISTENERS):
        listener(step, done, total, last)


def _recorded_beside(recipe, recipe_path: str):
    """The recipe with teacher.recorded_verdicts resolved against the recipe file's folder (as campaign files do)."""
    teacher = recipe.teacher
    if teacher is None or not teacher.recorded_verdicts or Path(teacher.recorded_verdicts).is_absolute():
        return recipe
    folder = (Path(recipe_path).parent / teacher.recorded_verdicts).resolve()
    if not folder.is_dir():
        raise AdaptError(f"{recipe_path}: teacher.recorded_verdicts: no such folder: {folder}")
    return recipe.model_copy(update={"teacher": teacher.model_copy(update={"recorded_verdicts": str(folder)})})


def build_context(recipe_path: str, warehouse: str | None = None, build_id: str | None = None) -> BuildContext:
    """The recipe, its build id and warehouse (default: runs/<first source campaign>/warehouse.duckdb)."""
    recipe, text = load_recipe(recipe_path)
    check_recipe_addresses(recipe, recipe_path, text)
    recipe = _recorded_beside(recipe, recipe_path)
    path = warehouse or recipe.warehouse or f"runs/{recipe.selection.source_campaigns[0]}/warehouse.duckdb"
    try:
        return BuildContext(build_id=build_id or recipe.name, recipe=recipe, recipe_text=text,
                            warehouse=str(Path(path).resolve()))
    except ValueError as exc:  # the recipe's name is checked by the recipe itself: this is the option
        raise AdaptError(f"--build-id {str(build_id)[:80]!r}: use letters, digits, '_', '-', '.' (at most 100)") from exc


def check_recipe_addresses(recipe: Recipe, where: str, text: str) -> None:
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
    """Submit the calls (at most the synthesizer's concurrency at once); record the answers in batches as they
    arrive (one pair of transactions per batch, at most every 2 s)."""
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
            batch = [(futures[f], f.result()) for f in finished]
            for record in book.record_many(batch, counter) if batch else []:
                done.append(record)
                _notify(step, len(done), len(jobs), f"{record.pair_id}: {record.status.value}")
            pending = list(not_done)
    return done


def notes_step(ctx: BuildContext, out: str) -> NotesSummary:
    """The build's pairs -> its notes corpus, through the notes teacher (litellm, or replay)."""
    spec = ctx.recipe.notes
    if spec is None:
        raise AdaptError(f"recipe {ctx.recipe.name} has no notes section")
    client = make_client(spec.teacher, "notes.teacher")
    ensure_limits({llm_tag(spec.teacher.model): spec.teacher.concurrency})
    return notes_task.with_options(tags=[llm_tag(spec.teacher.model)])(ctx, client, out)


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
        records += book.record_many([(None, h) for h in hopeless])
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


def unjudgeable(ctx: BuildContext, profilers: dict[str, str] | None, judge_plugin: str | None) -> str | None:
    """One line when no repair could be judged here (no GPU, no service, no recorded verdicts), else None."""
    from ptxcore.judge import NoGpuJudge

    from .campaign import select_judges

    with Warehouse(ctx.warehouse, read_only=True) as wh:
        items = AdaptStore(wh, ctx.build_id).selections(SelectionOutcome.SELECTED)
    teacher = ctx.recipe.teacher
    arches = sorted({i.arch for i in items})
    if teacher is None or not arches:
        return None
    config = CampaignConfig(name=ctx.repair_campaign_id, models=[teacher.model], architectures=arches,
                            problems=sorted({i.problem for i in items}), profilers=teacher.profilers,
                            recorded_verdicts=teacher.recorded_verdicts)
    blind = [a for a, j in select_judges(config, profilers, judge_plugin).items() if isinstance(j, NoGpuJudge)]
    if not blind:
        return None
    return (f"build {ctx.build_id}: nothing can judge the repairs here: no {', '.join(blind)} GPU, no --profiler and no "
            "teacher.recorded_verdicts, so every repair turn would be NOT_EVALUATED and no pair could be kept "
            "(run on a GPU host, pass --profiler URL, or name a recorded-verdict folder)")


@flow(name="adapt-build", flow_run_name=_flow_run_name, log_prints=False)
def adapt_build_flow(recipe_path: str, steps: list[str] | None = None, warehouse: str | None = None,
                     build_id: str | None = None, out_dir: str | None = None, profilers: dict[str, str] | None = None,
                     mlflow_tracking_uri: str | None = None, judge_plugin: str | None = None) -> BuildSummary:
    """Run (or resume) the recipe's steps; returns what each reported, and where it stopped (if it did)."""
    ctx = build_context(recipe_path, warehouse, build_id)
    todo = resolve_steps(ctx, steps)
    out = out_dir or str(Path(ctx.warehouse).parent / "adapt" / ctx.build_id)
    summary: dict[str, object] = {}
    done: list[str] = []
    for step in todo:
        _notify(step, 0, 0, "starting")
        stopped = _step(step, ctx, summary, out, profilers, mlflow_tracking_uri, judge_plugin)
        done.append(step)
        _notify(step, 1, 1, "stopped" if stopped else "done")
        if stopped:
            return BuildSummary(build_id=ctx.build_id, warehouse=ctx.warehouse, steps=done, stopped=stopped, **summary)
    return BuildSummary(build_id=ctx.build_id, warehouse=ctx.warehouse, steps=done, **summary)


def _step(step: str, ctx: BuildContext, summary: dict[str, object], out: str, profilers, mlflow_uri, plugin) -> str | None:
    """Run one step into `summary`; returns why the build stops after it (None: go on)."""
    if step == "select":
        summary["selection"] = result = select_task(ctx)
        return result.refusal or None
    if step == "repair":
        blocked = unjudgeable(ctx, profilers, plugin)
        if blocked:
            return blocked
        summary["repair"] = repair_flow(ctx, profilers, mlflow_uri, plugin)
        return None
    if step == "pairs":
        summary["pairs"] = result = pairs_task(ctx)
        return result.refusal or None
    if step == "notes":
        summary["notes"] = notes_step(ctx, out)
        return None
    if step == "reason":
        summary["reason"] = reason_step(ctx)
        return None
    summary["export"] = export_task(ctx, out)
    return None
