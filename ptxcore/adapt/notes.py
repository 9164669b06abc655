"""The notes step: a build's (wrong, fixed) pairs -> a repair-notes corpus with provenance (paper Table 4).

Every kept Fixit pair becomes a `RepairPair` (the wrong turn with its model-facing feedback, the repair turn, the
source trajectory's prompt as task context) and one teacher call (retrieval.distill.collect_notes; litellm, or
the replay teacher in the demo). The records go to the warehouse table `repair_notes` under the collection id
(resumable: a rerun distils only pairs without a record) and to `<collection>.notes.jsonl` beside the export, with
`<collection>.notes.provenance.json` (build, recipe hash, teacher, prompt hash, counts, refusals, corpus hash). A
campaign then retrieves from it with `repair_retrieval: {mode: notes, notes: "warehouse:<collection>"}` (or the
JSONL file).
"""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import Field

from ptxcore.agent.feedback import clean_log
from ptxcore.agent.types import LLMClient
from ptxcore.schema import FrozenModel, text_sha256
from ptxcore.warehouse import Warehouse
from ptxcore.warehouse.sft import write_text_atomic

from .errors import AdaptError
from .recipe import recipe_sha256
from .repair import checked_source_prompt
from .retrieval import (
    NoteRecord,
    RepairNotesIndex,
    RepairPair,
    collect_notes,
    note_rows,
    repair_pair_from_turns,
)
from .retrieval.distill import SYSTEM_PROMPT, USER_PROMPT
from .retrieval.source import NOTES_QUERY, parse_note_lines
from .spec import Template
from .stages import BuildContext, TurnIndex, pair_turns
from .store import AdaptStore


class NotesSummary(FrozenModel):
    """What the notes step did."""

    collection_id: str
    """Warehouse collection."""
    pairs: int = Field(ge=0)
    """Kept pairs of the build."""
    distilled: int = Field(ge=0)
    """Pairs distilled in this run."""
    refused: dict[str, str] = Field(default_factory=dict)
    """Pairs whose answer was refused in this run -> why (one line)."""
    records: int = Field(ge=0)
    """Records in the collection now."""
    corpus_sha256: str = ""
    """Identity of the corpus (what turn_augmentations.source_sha256 records)."""
    jsonl: str = ""
    """The corpus file."""
    provenance: str = ""
    """Its provenance file."""


def collection_id(ctx: BuildContext) -> str:
    notes = ctx.recipe.notes
    return (notes.collection if notes is not None and notes.collection else f"{ctx.build_id}-notes")


def repair_pairs(wh: Warehouse, ctx: BuildContext) -> list[RepairPair]:
    """The build's kept Fixit pairs as distillation inputs."""
    index, pairs = TurnIndex(wh), []
    for pair in AdaptStore(wh, ctx.build_id).pairs(kept_only=True):
        wrong, fixed = pair_turns(index, pair)
        prompt = checked_source_prompt(wrong)
        wrong = wrong.model_copy(update={"feedback": clean_log(wrong.feedback)})
        pairs.append(repair_pair_from_turns(pair.pair_id, wrong, fixed, task_prompt=f"{prompt.system}\n\n{prompt.user}"))
    return pairs


def _stored(wh: Warehouse, collection: str) -> list[NoteRecord]:
    _, rows = wh.sql(NOTES_QUERY, [collection])
    return parse_note_lines((r[0] for r in rows), f"warehouse:{collection}") if rows else []


def _provenance(ctx: BuildContext, collection: str, pairs: int, records: list[NoteRecord], refused: dict[str, str],
                corpus: str, model: str) -> dict:
    return {"collection_id": collection, "build_id": ctx.build_id, "recipe": ctx.recipe.name,
            "recipe_sha256": recipe_sha256(ctx.recipe_text), "teacher": model,
            "prompt_template_sha256": text_sha256(SYSTEM_PROMPT + "\0" + USER_PROMPT), "pairs": pairs,
            "records": len(records), "refused_this_run": refused, "corpus_sha256": corpus,
            "record_sha256": sorted(r.sha256 for r in records),
            "sources": sorted({f"{r.wrong_ref.campaign_id}" for r in records if r.wrong_ref is not None}
                              | {f"{r.fixed_ref.campaign_id}" for r in records if r.fixed_ref is not None})}


def run_notes(wh: Warehouse, ctx: BuildContext, client: LLMClient, out_dir: Path) -> NotesSummary:
    """Distil the pairs not yet in the collection; write the corpus and its provenance."""
    notes = ctx.recipe.notes
    if ctx.recipe.template is not Template.FIXIT or notes is None:
        raise AdaptError(f"recipe {ctx.recipe.name}: no `notes` section (Fixit recipes only)")
    collection = collection_id(ctx)
    pairs = repair_pairs(wh, ctx)
    done = {r.pair_id for r in _stored(wh, collection)}
    result = collect_notes(pairs, client, notes.teacher.model, done=done,
                           index_of=lambda p: p.wrong_ref.turn if p.wrong_ref is not None else 0)
    if result.records:
        wh.upsert_rows("repair_notes", note_rows(collection, result.records))
    records = _stored(wh, collection)
    refused = {f.pair_id: f.reason for f in result.failures}
    if not records:
        return NotesSummary(collection_id=collection, pairs=len(pairs), distilled=0, refused=refused, records=0)
    corpus = RepairNotesIndex.corpus_identity(records)
    out_dir.mkdir(parents=True, exist_ok=True)
    jsonl = out_dir / f"{collection}.notes.jsonl"
    write_text_atomic(jsonl, "".join(r.model_dump_json() + "\n" for r in records))
    prov = out_dir / f"{collection}.notes.provenance.json"
    write_text_atomic(prov, json.dumps(_provenance(ctx, collection, len(pairs), records, refused, corpus,
                                                   notes.teacher.model), indent=2, sort_keys=True) + "\n")
    return NotesSummary(collection_id=collection, pairs=len(pairs), distilled=len(result.records), refused=refused,
                        records=len(records), corpus_sha256=corpus, jsonl=str(jsonl), provenance=str(prov))
