"""The build's stages over a warehouse: select, plan/finish repairs, collect pairs (idempotent).

Each stage reads what the earlier ones recorded and replaces its own rows, so a rerun writes the same
rows again and never duplicates; the stages that call models (repair, reason) skip what is recorded.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable

from pydantic import Field

from ptxcore.agent import CampaignConfig, TrajectoryPlan
from ptxcore.agent.records import now_iso
from ptxcore.schema import FrozenModel, TurnRecord
from ptxcore.warehouse import Warehouse

from .errors import AdaptError
from .models import PairRecord, RepairRecord, SelectionOutcome, SelectionRecord
from .pairs import PairSummary, fixit_pairs, kernelgen_pairs, post_balance, summarize
from .recipe import Recipe, recipe_sha256
from .repair import SourcePrompt, plan_repairs, repair_campaign_id, repair_config
from .select import SelectionSummary, select_turns
from .spec import TargetCredit, Template, resolve_variants
from .store import AdaptStore


class BuildContext(FrozenModel):
    """One build: the recipe it follows and where its rows live."""

    build_id: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.\-]*$", max_length=100)
    """Build identity (the recipe name unless overridden; letters, digits, '_', '-', '.'); rerunning it resumes."""
    recipe: Recipe
    """The recipe."""
    recipe_text: str
    """The recipe file's text (recorded)."""
    warehouse: str
    """DuckDB file with the source campaigns and the adapt tables."""

    @property
    def repair_campaign_id(self) -> str:
        return repair_campaign_id(self.build_id)


class RepairPlan(FrozenModel):
    """What the repair step hands to the campaign machinery."""

    config: CampaignConfig
    """The repair campaign."""
    config_text: str
    """Its YAML (recorded as the campaign's file)."""
    plans: list[TrajectoryPlan]
    """One trajectory per selected failure."""
    prompts: dict[str, SourcePrompt]
    """Prompt of each trajectory, by trajectory id."""


class TurnIndex:
    """Turn records by key, loaded one campaign at a time on first use."""

    def __init__(self, wh: Warehouse) -> None:
        self.wh = wh
        self._by_campaign: dict[str, dict[tuple[str, int], TurnRecord]] = {}

    def campaign(self, campaign_id: str) -> dict[tuple[str, int], TurnRecord]:
        if campaign_id not in self._by_campaign:
            self._by_campaign[campaign_id] = {(t.trajectory_id, t.turn): t for t in self.wh.turns(campaign_id)}
        return self._by_campaign[campaign_id]

    def get(self, campaign_id: str, trajectory_id: str, turn: int) -> TurnRecord:
        found = self.campaign(campaign_id).get((trajectory_id, turn))
        if found is None:
            raise AdaptError(f"turn {campaign_id} / {trajectory_id} / {turn} is no longer in the warehouse")
        return found

    def by_trajectory(self, campaign_id: str) -> dict[str, list[TurnRecord]]:
        out: dict[str, list[TurnRecord]] = defaultdict(list)
        for (tid, _), rec in sorted(self.campaign(campaign_id).items()):
            out[tid].append(rec)
        return out


def source_turns(wh: Warehouse, campaign_ids: Iterable[str]) -> list[TurnRecord]:
    """Every turn of the source campaigns; an unknown campaign is an error naming what is there."""
    known = {c.campaign_id for c in wh.campaigns()}
    turns: list[TurnRecord] = []
    for cid in campaign_ids:
        if cid not in known:
            there = ", ".join(sorted(known)) or "none"
            raise AdaptError(f"unknown campaign {cid!r} in {wh.path} (campaigns there: {there})")
        turns += wh.turns(cid)
    return turns


def record_build(store: AdaptStore, ctx: BuildContext, selection_json: str | None = None) -> None:
    earlier = store.build() or {}
    store.put_build({
        "recipe_name": ctx.recipe.name, "template": ctx.recipe.template.value, "config_label": ctx.recipe.config_label,
        "recipe_yaml": ctx.recipe_text, "recipe_sha256": recipe_sha256(ctx.recipe_text),
        "selection_json": selection_json or earlier.get("selection_json"),
        "created_at": earlier.get("created_at") or now_iso(), "updated_at": now_iso()})


def run_select(wh: Warehouse, ctx: BuildContext) -> SelectionSummary:
    """Select, record every source turn's outcome, record the resolved spec with the build."""
    spec = ctx.recipe.selection
    variants = resolve_variants(spec)
    turns = source_turns(wh, spec.source_campaigns)
    records, summary = select_turns(ctx.build_id, turns, spec, ctx.recipe.template, variants)
    if summary.refusal:
        return summary
    store = AdaptStore(wh, ctx.build_id)
    before = {r.item_id for r in store.selections(SelectionOutcome.SELECTED)}
    after = {r.item_id for r in records if r.outcome is SelectionOutcome.SELECTED}
    if before and before != after and store.repairs():
        raise AdaptError(f"build {ctx.build_id}: the selection changed ({len(before)} -> {len(after)} items) after its "
                         "repairs were planned; start a new build (--build-id NAME)")
    store.replace_selection(records)
    resolved = spec.resolved(variants if variants is not None else sorted({t.prompt_variant for t in turns}))
    record_build(store, ctx, resolved.model_dump_json())
    return summary


def selected(wh: Warehouse, ctx: BuildContext, index: TurnIndex) -> tuple[list[SelectionRecord], dict[str, TurnRecord]]:
    """The selected items and their source turns."""
    items = AdaptStore(wh, ctx.build_id).selections(SelectionOutcome.SELECTED)
    if not items:
        raise AdaptError(f"build {ctx.build_id} has no selection in {wh.path}: run the select step first")
    sources = {i.item_id: index.get(i.source.campaign_id, i.source.trajectory_id, i.source.turn) for i in items}
    return items, sources


def plan_repair(wh: Warehouse, ctx: BuildContext) -> RepairPlan:
    """The repair campaign for the selected failures; their repair records are written (planned)."""
    teacher = ctx.recipe.teacher
    if teacher is None:
        raise AdaptError(f"recipe {ctx.recipe.name}: a {ctx.recipe.template.value} build has no repair step")
    items, sources = selected(wh, ctx, TurnIndex(wh))
    config, text = repair_config(ctx.build_id, teacher, items, ctx.warehouse)
    plans, prompts, records = plan_repairs(ctx.build_id, teacher, items, sources, config)
    store = AdaptStore(wh, ctx.build_id)
    done = {r.item_id: r for r in store.repairs()}
    same = lambda r: r.item_id in done and done[r.item_id].prompt_sha256 == r.prompt_sha256  # noqa: E731
    store.put_repairs([done[r.item_id] if same(r) else r for r in records])
    return RepairPlan(config=config, config_text=text, plans=plans, prompts=prompts)


def finish_repair(wh: Warehouse, ctx: BuildContext) -> list[RepairRecord]:
    """Copy each repair trajectory's stop reason and turn count onto its repair record."""
    store = AdaptStore(wh, ctx.build_id)
    trajectories = {t.trajectory_id: t for t in wh.trajectories(ctx.repair_campaign_id)}
    updated = []
    for rec in store.repairs():
        t = trajectories.get(rec.repair_trajectory_id)
        updated.append(rec if t is None else rec.model_copy(update={"stop_reason": t.stop_reason,
                                                                    "num_turns": t.num_turns}))
    store.put_repairs(updated)
    return updated


def run_pairs(wh: Warehouse, ctx: BuildContext) -> PairSummary:
    """Collect pairs (and post-balance them); replaces the build's pair rows."""
    index = TurnIndex(wh)
    store = AdaptStore(wh, ctx.build_id)
    items, sources = selected(wh, ctx, index)
    if ctx.recipe.template is Template.FIXIT:
        repairs = store.repairs()
        if not repairs:
            raise AdaptError(f"build {ctx.build_id} has no repairs: run the repair step first")
        by_item = {i.item_id: i for i in items}
        repairs = [r for r in repairs if r.item_id in by_item]
        pairs, statuses = fixit_pairs(ctx.build_id, repairs, by_item, sources,
                                      index.by_trajectory(ctx.repair_campaign_id), ctx.recipe.pairs)
        count = len(repairs)
    else:
        pairs, statuses, count = kernelgen_pairs(ctx.build_id, items, sources), Counter(), len(items)
    pairs, by_problem = post_balance(pairs, ctx.recipe.selection)
    store.replace_pairs(pairs)
    summary = summarize(ctx.build_id, count, pairs, statuses, by_problem)
    if summary.pairs == 0:
        seen = ", ".join(f"{k} {v}" for k, v in sorted(statuses.items())) or "none recorded"
        hint = (" (NOT_EVALUATED: judged without a GPU and without a recorded verdict; see teacher.recorded_verdicts)"
                if "NOT_EVALUATED" in statuses else "")
        what = "repairs has" if ctx.recipe.template is Template.FIXIT else "selected turns is"
        credit = ("whose target instructions executed" if ctx.recipe.pairs.target_credit is TargetCredit.EXECUTED
                  else "whose target path carried the work (target_credit: work)")
        summary = summary.model_copy(update={"refusal": f"build {ctx.build_id}: no pairs: none of {count} {what} a "
                                             f"correct version {credit} (repair turns: {seen}){hint}"})
    return summary


def pair_turns(index: TurnIndex, pair: PairRecord) -> tuple[TurnRecord, TurnRecord]:
    s, c = pair.source, pair.correct
    return index.get(s.campaign_id, s.trajectory_id, s.turn), index.get(c.campaign_id, c.trajectory_id, c.turn)


__all__ = ["BuildContext", "RepairPlan", "TurnIndex", "finish_repair", "pair_turns", "plan_repair",
           "record_build", "run_pairs", "run_select", "selected", "source_turns"]
