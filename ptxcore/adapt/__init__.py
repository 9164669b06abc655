"""Adaptation data engine (paper Sec. 3): failures -> repairs -> pairs -> reasoning -> SFT Parquet.

Pure library: stages work on a `ptxcore.warehouse.Warehouse` and on record models; the Prefect flows
(flows/adapt.py) only drive them. Model calls go through ptxcore.agent's client (litellm, or replay).

    recipe, text = load_recipe("campaigns/adapt/s5.yaml")
    ctx = BuildContext(build_id=recipe.name, recipe=recipe, recipe_text=text, warehouse="ptx.duckdb")
    run_select(wh, ctx); plan = plan_repair(wh, ctx)  # -> the campaign machinery runs plan.plans
    finish_repair(wh, ctx); run_pairs(wh, ctx); run_notes(wh, ctx, teacher, out)  # the Table 4 corpus
    ReasonBook(wh, ctx) ...; run_export(wh, ctx, out, counter)     # messages + TRL prompt-completion Parquet
"""

from .budget import chatml, count_messages, resolve_counter
from .errors import AdaptError
from .export import ExportSummary, run_export
from .models import (
    PairRecord,
    PairStatus,
    ReasoningKind,
    ReasoningRecord,
    ReasoningStatus,
    RepairRecord,
    SelectionOutcome,
    SelectionRecord,
    SftMessage,
    SftRow,
)
from .notes import NotesSummary, run_notes
from .pairs import PairSummary
from .reasoning import SynthesisJob, run_job
from .recipe import STEPS, Recipe, load_recipe, parse_recipe
from .repair import repair_user_message
from .select import SelectionSummary
from .spec import BalancePoint, SelectionSpec, Template
from .stages import BuildContext, RepairPlan, finish_repair, plan_repair, run_pairs, run_select
from .synthesis import ReasonBook

__all__ = [
    "AdaptError", "BalancePoint", "BuildContext", "ExportSummary", "NotesSummary", "PairRecord", "PairStatus", "PairSummary",
    "ReasonBook", "ReasoningKind", "ReasoningRecord", "ReasoningStatus", "Recipe", "RepairPlan", "RepairRecord",
    "STEPS", "SelectionOutcome", "SelectionRecord", "SelectionSpec", "SelectionSummary", "SftMessage", "SftRow",
    "SynthesisJob", "Template", "chatml", "count_messages", "finish_repair", "load_recipe", "parse_recipe",
    "plan_repair", "repair_user_message", "resolve_counter", "run_export", "run_job", "run_notes", "run_pairs",
    "run_select",
]
