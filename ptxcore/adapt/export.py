"""The export step: rows from kept pairs and accepted monologues, the token budget, and the files.

Writes, into the output folder: `<build>.parquet` (id, messages[{role, content, step_loss_mask}], metadata),
`<build>.prompt_completion.parquet` (the same rows in TRL's conversational prompt-completion form: id, prompt,
completion), `<build>.parquet.manifest.json` (input and output sha256, counts, every dropped row with its reason
and, for the budget, the counter that decided it), `<build>.parquet.length_stats.json` and `<build>.training.json`
(the training configuration for an external trainer). Rows stream: a first pass counts every candidate (keeping
only its id and count), a second builds the written rows again in their final order and writes them in batches.
Same warehouse rows, same bytes: nothing time-dependent is in the files (the export time is in adapt_exports).
"""

from __future__ import annotations

import hashlib
import json
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pydantic import Field

from ptxcore.agent.campaign import ModelSpec
from ptxcore.agent.records import now_iso
from ptxcore.schema import FrozenModel
from ptxcore.warehouse import Warehouse
from ptxcore.warehouse.sft import (
    PROMPT_COMPLETION,
    SftParquetWriter,
    file_sha256,
    sft_schema,
    write_text_atomic,
)

from .budget import RowCounter
from .errors import AdaptError
from .models import PairRecord, PairStatus, ReasoningRecord, RowStatus, SftRow
from .recipe import recipe_sha256
from .rows import METADATA_FIELDS, TARGET_FORMAT, build_row, message_dicts, prompt_completion, row_id
from .stages import BuildContext, TurnIndex
from .stats import LengthStats
from .store import AdaptStore, dumps, flat
from .synthesis import chosen_reasoning, row_inputs

BATCH_ROWS = 32
"""Rows per Parquet row group and per warehouse insert."""


class ExportSummary(FrozenModel):
    """What the export wrote."""

    build_id: str
    """Build."""
    parquet: str
    """Path of the Parquet file (messages layout)."""
    parquet_sha256: str
    """Its sha256."""
    prompt_completion: str = ""
    """Path of the prompt-completion Parquet (TRL's conversational layout)."""
    prompt_completion_sha256: str = ""
    """Its sha256."""
    manifest: str
    """Path of the manifest."""
    rows: int = Field(ge=0)
    """Rows written."""
    dropped: dict[str, int]
    """Dropped candidates per reason."""
    tokenizer: str
    """What counted the budget (vocabulary + template)."""
    tokenizer_fallback: bool = False
    """The count is tiktoken's estimate, not the Qwen vocabulary's."""
    tokenizer_note: str = ""
    """Why a fallback tokenizer was used (empty when none was)."""


class Candidate(FrozenModel):
    """A row that could be written, with its count (its messages are rebuilt when written)."""

    pair: PairRecord
    """The pair."""
    reasoning: ReasoningRecord
    """Its monologue."""
    row_id: str
    """Row id."""
    total_tokens: int = Field(ge=0)
    """Tokens of the rendered row."""


def training_config(ctx: BuildContext, files: dict[str, dict[str, str]], rows: int) -> dict[str, Any]:
    return {"note": "Training runs elsewhere (an external trainer); this file only describes it.",
            "data": {"rows": rows, "template": ctx.recipe.template.value, "files": files,
                     "loss": "the last (assistant) message only: step_loss_mask in `messages`, the `completion` "
                             "column in the prompt-completion file"},
            **ctx.recipe.training.model_dump(mode="json")}


def _entry(pair: PairRecord, ctx: BuildContext) -> dict[str, Any]:
    return {"pair_id": pair.pair_id, "row_id": row_id(ctx.recipe.source_label, pair), "problem": pair.problem}


def _plan(wh: Warehouse, ctx: BuildContext, counter: RowCounter, index: TurnIndex) -> tuple[list[Candidate], list[dict]]:
    """Pass 1: every pair of the build as a counted candidate or a dropped entry."""
    store = AdaptStore(wh, ctx.build_id)
    reasoning: dict[str, list[ReasoningRecord]] = {}
    for r in store.reasoning():
        reasoning.setdefault(r.pair_id, []).append(r)
    built, dropped = [], []
    for pair in store.pairs():
        entry = _entry(pair, ctx)
        if pair.status is not PairStatus.KEPT:
            dropped.append({**entry, "reason": f"pair_{pair.status.value}"})
            continue
        chosen = chosen_reasoning(reasoning.get(pair.pair_id, []))
        if chosen is None:
            last = max(reasoning.get(pair.pair_id, []), key=lambda r: r.attempt, default=None)
            dropped.append({**entry, "reason": f"reasoning_{last.status.value}" if last else "no_reasoning",
                            "detail": last.detail if last else ""})
            continue
        try:
            messages = message_dicts(row_inputs(ctx, pair, index, chosen), renderer=counter.renderer)
        except ValueError as exc:
            dropped.append({**entry, "reason": "chat_template_roundtrip", "detail": str(exc)[:300]})
            continue
        built.append(Candidate(pair=pair, reasoning=chosen, row_id=entry["row_id"], total_tokens=counter.count(messages)))
    return built, dropped


def _row(ctx: BuildContext, c: Candidate, index: TurnIndex, counter: RowCounter) -> SftRow:
    inputs = row_inputs(ctx, c.pair, index, c.reasoning)
    extra = {"total_tokens": c.total_tokens, "tokenizer": counter.name}
    return build_row(inputs.model_copy(update={"extra": extra}), counter.renderer)


def _row_record(row: SftRow, status: RowStatus, total: int, tokenizer: str) -> dict[str, Any]:
    return {"row_id": row.id, "pair_id": row.metadata["pair_id"], "template": row.template.value,
            "reasoning_attempt": row.metadata["reasoning_attempt"], "status": status.value, "total_tokens": total,
            "tokenizer": tokenizer, "messages_json": dumps([m.model_dump() for m in row.messages]),
            "metadata_json": dumps(row.metadata)}


def _batches(items: list[Candidate]) -> Iterator[list[Candidate]]:
    for start in range(0, len(items), BATCH_ROWS):
        yield items[start:start + BATCH_ROWS]


def _write_rows(ctx: BuildContext, wh: Warehouse, stem: Path, order: list[Candidate], over: list[Candidate],
                counter: RowCounter) -> tuple[str, str, LengthStats]:
    """Pass 2: the rows in their final order, batch by batch, into both Parquet files and adapt_rows."""
    index, stats = TurnIndex(wh), LengthStats()
    pc_path = stem.with_name(f"{ctx.build_id}.prompt_completion.parquet")
    with SftParquetWriter(stem, sft_schema(METADATA_FIELDS)) as main, SftParquetWriter(pc_path, PROMPT_COMPLETION) as pc:
        def records() -> Iterator[list[dict[str, Any]]]:
            for batch in _batches(order):
                rows = [_row(ctx, c, index, counter) for c in batch]
                main.write([{"id": r.id, "messages": [m.model_dump() for m in r.messages], "metadata": r.metadata}
                            for r in rows])
                pc.write([prompt_completion(r) for r in rows])
                for r, c in zip(rows, batch, strict=True):
                    stats.add(r, c.total_tokens)
                yield [_row_record(r, RowStatus.KEPT, c.total_tokens, counter.name) for r, c in zip(rows, batch, strict=True)]
            for batch in _batches(over):
                yield [_row_record(_row(ctx, c, index, counter), RowStatus.OVER_BUDGET, c.total_tokens, counter.name)
                       for c in batch]

        AdaptStore(wh, ctx.build_id).replace_rows_batches(records())
        return main.close(), pc.close(), stats


def inputs_sha256(built: list[Candidate]) -> str:
    """sha256 of the JSON list of every candidate's pair and monologue records, hashed entry by entry."""
    digest = hashlib.sha256(b"[")
    for i, c in enumerate(built):
        digest.update(((", " if i else "") + dumps({"pair": flat(c.pair), "reasoning": flat(c.reasoning)})).encode())
    digest.update(b"]")
    return digest.hexdigest()


def _manifest(ctx: BuildContext, wh: Warehouse, counts: dict[str, Any], dropped: list[dict], built: list[Candidate],
              tokenizer: dict[str, Any], outputs: dict[str, Any]) -> dict[str, Any]:
    campaigns = {c.campaign_id: c.config_sha256 for c in wh.campaigns()}
    sources = [*ctx.recipe.selection.source_campaigns]
    if ctx.recipe.teacher is not None:
        sources.append(ctx.repair_campaign_id)
    build = AdaptStore(wh, ctx.build_id).build() or {}
    return {
        "builder": "ptxbench.adapt", "template": ctx.recipe.template.value,
        "target_format": TARGET_FORMAT[ctx.recipe.template], "build_id": ctx.build_id, "recipe": ctx.recipe.name,
        "config_label": ctx.recipe.config_label, "recipe_sha256": recipe_sha256(ctx.recipe_text),
        "reproduces": ctx.recipe.reproduces, "our_inference": list(ctx.recipe.our_inference),
        "selection": json.loads(build.get("selection_json") or "null"),
        "inputs": {"campaigns": {c: campaigns.get(c) for c in sources},
                   "pairs_and_reasoning_sha256": inputs_sha256(built)},
        "tokenizer": tokenizer, "counts": counts, "dropped": dropped, "outputs": outputs,
        "shuffle_seed": ctx.recipe.export.shuffle_seed,
        "synthesizer": _model_record(ctx.recipe.synthesizer.model),
        "teacher": _model_record(ctx.recipe.teacher.model) if ctx.recipe.teacher is not None else None,
    }


def _model_record(spec: ModelSpec) -> dict[str, Any]:
    """Which model wrote a part of the rows (Table 10's synthesizer column). The endpoint is left out: a URL may
    carry credentials, and the manifest travels with the data."""
    return {"model": spec.model, "label": spec.label}


def _order(ctx: BuildContext, kept: list[Candidate]) -> list[Candidate]:
    order = sorted(kept, key=lambda c: c.row_id)
    if ctx.recipe.export.shuffle_seed is not None:
        random.Random(ctx.recipe.export.shuffle_seed).shuffle(order)
    return order


def run_export(wh: Warehouse, ctx: BuildContext, out_dir: Path, counter: RowCounter, note: str = "") -> ExportSummary:
    """Count, budget and write the rows; record them (kept and over budget) and the export."""
    budget, index = ctx.recipe.export.max_tokens, TurnIndex(wh)
    built, dropped = _plan(wh, ctx, counter, index)
    kept = [c for c in built if c.total_tokens <= budget]
    over = [c for c in built if c.total_tokens > budget]
    dropped += [{"pair_id": c.pair.pair_id, "row_id": c.row_id, "problem": c.pair.problem, "reason": "over_max_tokens",
                 "total_tokens": c.total_tokens, "max_tokens": budget, "counted_by": counter.name,
                 "counter_fallback": counter.fallback} for c in over]
    if not kept:
        reasons = ", ".join(f"{k}: {v}" for k, v in sorted(_reasons(dropped).items())) or "no pairs"
        raise AdaptError(f"build {ctx.build_id}: nothing to export ({reasons})")
    out_dir.mkdir(parents=True, exist_ok=True)
    stem = out_dir / f"{ctx.build_id}.parquet"
    sha, pc_sha, stats = _write_rows(ctx, wh, stem, _order(ctx, kept), over, counter)
    pc_path = stem.with_name(f"{ctx.build_id}.prompt_completion.parquet")
    stats_path = stem.with_name(stem.name + ".length_stats.json")
    stats_sha = write_text_atomic(stats_path, json.dumps(stats.summary(), indent=2, sort_keys=True) + "\n")
    files = {"messages": {"file": stem.name, "sha256": sha, "format": "messages with step_loss_mask"},
             "prompt_completion": {"file": pc_path.name, "sha256": pc_sha,
                                   "format": "TRL conversational prompt-completion (loss on the completion)"}}
    training_path = out_dir / f"{ctx.build_id}.training.json"
    training_sha = write_text_atomic(training_path, json.dumps(training_config(ctx, files, len(kept)),
                                                               indent=2, sort_keys=True) + "\n")
    counts = {"pairs": len(AdaptStore(wh, ctx.build_id).pairs()), "rows_built": len(built), "rows": len(kept),
              "dropped": len(dropped), "dropped_by_reason": _reasons(dropped)}
    outputs = {"parquet": {"file": stem.name, "sha256": sha}, "prompt_completion": {"file": pc_path.name, "sha256": pc_sha},
               "length_stats": {"file": stats_path.name, "sha256": stats_sha},
               "training": {"file": training_path.name, "sha256": training_sha}}
    manifest_path = stem.with_name(stem.name + ".manifest.json")
    manifest = _manifest(ctx, wh, counts, dropped, built, {**counter.describe(budget), "note": note or counter.note},
                         outputs)
    manifest_sha = write_text_atomic(manifest_path, json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    AdaptStore(wh, ctx.build_id).put_export({
        "parquet_sha256": sha, "path": str(stem.resolve()), "manifest_sha256": manifest_sha, "stats_sha256": stats_sha,
        "training_sha256": training_sha, "rows": len(kept), "dropped": len(dropped), "tokenizer": counter.name,
        "created_at": now_iso()})
    return ExportSummary(build_id=ctx.build_id, parquet=str(stem), parquet_sha256=sha, prompt_completion=str(pc_path),
                         prompt_completion_sha256=pc_sha, manifest=str(manifest_path), rows=len(kept),
                         dropped=_reasons(dropped), tokenizer=counter.name, tokenizer_fallback=counter.fallback,
                         tokenizer_note=note or counter.note)


def _reasons(dropped: list[dict]) -> dict[str, int]:
    out: dict[str, int] = {}
    for d in dropped:
        out[d["reason"]] = out.get(d["reason"], 0) + 1
    return out


def verify_file(path: Path, sha256: str) -> bool:
    return path.is_file() and file_sha256(path) == sha256
