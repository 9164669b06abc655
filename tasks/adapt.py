"""Thin Prefect tasks of the adapt build: each opens the warehouse, calls one ptxcore.adapt stage, returns
its summary. Model calls (synthesize) carry the tag llm:<provider>, like the campaign's generate task."""

from __future__ import annotations

from pathlib import Path

from prefect import task
from prefect.cache_policies import NO_CACHE

from ptxcore.adapt import (
    BuildContext,
    ExportSummary,
    PairSummary,
    ReasoningRecord,
    RepairPlan,
    SelectionSummary,
    SynthesisJob,
    finish_repair,
    plan_repair,
    resolve_counter,
    run_export,
    run_job,
    run_pairs,
    run_select,
)
from ptxcore.adapt.models import RepairRecord
from ptxcore.adapt.notes import NotesSummary, run_notes
from ptxcore.adapt.recipe import SynthesizerSpec
from ptxcore.agent.records import now_iso
from ptxcore.agent.types import LLMClient
from ptxcore.warehouse import Warehouse


@task(name="adapt-select", task_run_name="select {ctx.build_id}", cache_policy=NO_CACHE)
def select_task(ctx: BuildContext) -> SelectionSummary:
    with Warehouse(ctx.warehouse) as wh:
        return run_select(wh, ctx)


@task(name="adapt-plan-repair", task_run_name="plan repairs {ctx.build_id}", cache_policy=NO_CACHE)
def plan_repair_task(ctx: BuildContext) -> RepairPlan:
    with Warehouse(ctx.warehouse) as wh:
        return plan_repair(wh, ctx)


@task(name="adapt-finish-repair", task_run_name="record repairs {ctx.build_id}", cache_policy=NO_CACHE)
def finish_repair_task(ctx: BuildContext) -> list[RepairRecord]:
    with Warehouse(ctx.warehouse) as wh:
        return finish_repair(wh, ctx)


@task(name="adapt-pairs", task_run_name="pairs {ctx.build_id}", cache_policy=NO_CACHE)
def pairs_task(ctx: BuildContext) -> PairSummary:
    with Warehouse(ctx.warehouse) as wh:
        return run_pairs(wh, ctx)


@task(name="adapt-notes", task_run_name="notes {ctx.build_id}", cache_policy=NO_CACHE, retries=0)
def notes_task(ctx: BuildContext, client: LLMClient, out_dir: str) -> NotesSummary:
    """Distil the build's pairs into its repair-notes corpus (resumable; the client retries its own calls)."""
    with Warehouse(ctx.warehouse) as wh:
        return run_notes(wh, ctx, client, Path(out_dir))


@task(name="adapt-synthesize", task_run_name="synthesize {label}", cache_policy=NO_CACHE, retries=0)
def synthesize_task(client: LLMClient, job: SynthesisJob, spec: SynthesizerSpec, label: str) -> ReasoningRecord:
    """One synthesizer call (retries live in the client); a failed call comes back as CALL_FAILED."""
    return run_job(client, job, spec, spec.model.model, now_iso())


@task(name="adapt-export", task_run_name="export {ctx.build_id}", cache_policy=NO_CACHE)
def export_task(ctx: BuildContext, out_dir: str) -> ExportSummary:
    counter, note = resolve_counter(ctx.recipe.export.tokenizer)
    with Warehouse(ctx.warehouse) as wh:
        return run_export(wh, ctx, Path(out_dir), counter, note)
