"""The export step: rows from kept pairs and accepted monologues, the token budget, and the files.

Writes, into the output folder: `<build>.parquet` (id, messages[{role, content, step_loss_mask}],
metadata), `<build>.parquet.manifest.json` (input and output sha256, counts, every dropped row with its
reason, tokenizer), `<build>.parquet.length_stats.json` and `<build>.training.json` (the training
configuration for an external trainer). Same warehouse rows, same bytes: nothing time-dependent is in
the files (the export time is in the adapt_exports row).
"""

from __future__ import annotations

import json
import random
import statistics
from pathlib import Path
from typing import Any

from pydantic import Field

from ptxcore.agent.campaign import ModelSpec
from ptxcore.agent.records import now_iso
from ptxcore.prompts import TokenCounter
from ptxcore.schema import FrozenModel, text_sha256
from ptxcore.warehouse import Warehouse
from ptxcore.warehouse.sft import file_sha256, write_sft_parquet, write_text_atomic

from .budget import RENDERING, count_messages
from .errors import AdaptError
from .models import PairStatus, RowStatus, SftRow
from .recipe import recipe_sha256
from .rows import METADATA_FIELDS, TARGET_FORMAT, build_row, message_dicts, row_id
from .stages import BuildContext, TurnIndex
from .store import AdaptStore, dumps, flat
from .synthesis import chosen_reasoning, row_inputs


class ExportSummary(FrozenModel):
    """What the export wrote."""

    build_id: str
    """Build."""
    parquet: str
    """Path of the Parquet file."""
    parquet_sha256: str
    """Its sha256."""
    manifest: str
    """Path of the manifest."""
    rows: int = Field(ge=0)
    """Rows written."""
    dropped: dict[str, int]
    """Dropped candidates per reason."""
    tokenizer: str
    """Tokenizer the budget was counted with."""
    tokenizer_note: str = ""
    """Why a fallback tokenizer was used (empty when none was)."""


def summarize_ints(values: list[int]) -> dict[str, float]:
    if not values:
        return {}
    v = sorted(values)
    pick = lambda q: v[round((len(v) - 1) * q)]  # noqa: E731
    return {"min": v[0], "p50": pick(0.5), "p90": pick(0.9), "p95": pick(0.95), "p99": pick(0.99), "max": v[-1],
            "mean": round(statistics.fmean(v), 3)}


def length_stats(rows: list[SftRow], tokens: dict[str, int]) -> dict[str, Any]:
    """Characters and tokens of the written rows (the reference builder's layout plus reasoning length)."""
    return {
        "num_rows": len(rows),
        "prompt_chars": summarize_ints([sum(len(m.content) for m in r.messages[:-1]) for r in rows]),
        "target_chars": summarize_ints([len(r.messages[-1].content) for r in rows]),
        "reasoning_chars": summarize_ints([int(r.metadata["reasoning_chars"] or 0) for r in rows]),
        "messages": summarize_ints([len(r.messages) for r in rows]),
        "total_tokens": summarize_ints([tokens[r.id] for r in rows]),
        "top_10_longest": [{"id": r.id, "total_tokens": tokens[r.id], "target_chars": len(r.messages[-1].content)}
                           for r in sorted(rows, key=lambda r: (-tokens[r.id], r.id))[:10]],
    }


def training_config(ctx: BuildContext, data_file: str, sha: str, rows: int) -> dict[str, Any]:
    return {"note": "Training runs elsewhere (an external trainer); this file only describes it.",
            "data": {"file": data_file, "sha256": sha, "rows": rows, "format": "messages with step_loss_mask",
                     "template": ctx.recipe.template.value},
            **ctx.recipe.training.model_dump(mode="json")}


def _candidates(wh: Warehouse, ctx: BuildContext, counter: TokenCounter) -> tuple[list, list[dict], list]:
    """(rows with their token counts, dropped entries, inputs used) over every pair of the build."""
    store, index = AdaptStore(wh, ctx.build_id), TurnIndex(wh)
    reasoning: dict[str, list] = {}
    for r in store.reasoning():
        reasoning.setdefault(r.pair_id, []).append(r)
    built, dropped, used = [], [], []
    for pair in store.pairs():
        entry = {"pair_id": pair.pair_id, "row_id": row_id(ctx.recipe.source_label, pair), "problem": pair.problem}
        if pair.status is not PairStatus.KEPT:
            dropped.append({**entry, "reason": f"pair_{pair.status.value}"})
            continue
        chosen = chosen_reasoning(reasoning.get(pair.pair_id, []))
        if chosen is None:
            last = max(reasoning.get(pair.pair_id, []), key=lambda r: r.attempt, default=None)
            why = f"reasoning_{last.status.value}" if last else "no_reasoning"
            dropped.append({**entry, "reason": why, "detail": last.detail if last else ""})
            continue
        inputs = row_inputs(ctx, pair, index, chosen)
        total = count_messages(counter, message_dicts(inputs))
        extra = {"total_tokens": total, "tokenizer": counter.name}
        row = build_row(inputs.model_copy(update={"extra": extra}))
        built.append((row, total))
        used.append({"pair": flat(pair), "reasoning": flat(chosen)})
    return built, dropped, used


def _row_record(row: SftRow, status: RowStatus, total: int, tokenizer: str) -> dict[str, Any]:
    return {"row_id": row.id, "pair_id": row.metadata["pair_id"], "template": row.template.value,
            "reasoning_attempt": row.metadata["reasoning_attempt"], "status": status.value, "total_tokens": total,
            "tokenizer": tokenizer, "messages_json": dumps([m.model_dump() for m in row.messages]),
            "metadata_json": dumps(row.metadata)}


def _manifest(ctx: BuildContext, wh: Warehouse, counts: dict[str, Any], dropped: list[dict], used: list,
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
        "selection": json.loads(build.get("selection_json") or "null"),
        "inputs": {"campaigns": {c: campaigns.get(c) for c in sources},
                   "pairs_and_reasoning_sha256": text_sha256(dumps(used))},
        "tokenizer": tokenizer, "counts": counts, "dropped": dropped, "outputs": outputs,
        "shuffle_seed": ctx.recipe.export.shuffle_seed,
        "synthesizer": _model_record(ctx.recipe.synthesizer.model),
        "teacher": _model_record(ctx.recipe.teacher.model) if ctx.recipe.teacher is not None else None,
    }


def _model_record(spec: ModelSpec) -> dict[str, Any]:
    """Which model wrote a part of the rows (Table 10's synthesizer column). The endpoint is left out: a URL may
    carry credentials, and the manifest travels with the data."""
    return {"model": spec.model, "label": spec.label}


def run_export(wh: Warehouse, ctx: BuildContext, out_dir: Path, counter: TokenCounter, note: str = "") -> ExportSummary:
    """Build, budget and write the rows; record them (kept and dropped) and the export."""
    budget = ctx.recipe.export.max_tokens
    built, dropped, used = _candidates(wh, ctx, counter)
    kept = [(r, t) for r, t in built if t <= budget]
    for row, total in built:
        if total > budget:
            dropped.append({"pair_id": row.metadata["pair_id"], "row_id": row.id, "problem": row.metadata["problem"],
                            "reason": "over_max_tokens", "total_tokens": total, "max_tokens": budget})
    if not kept:
        reasons = ", ".join(f"{k}: {v}" for k, v in sorted(_reasons(dropped).items())) or "no pairs"
        raise AdaptError(f"build {ctx.build_id}: nothing to export ({reasons})")
    rows = sorted((r for r, _ in kept), key=lambda r: r.id)
    if ctx.recipe.export.shuffle_seed is not None:
        random.Random(ctx.recipe.export.shuffle_seed).shuffle(rows)
    tokens = {r.id: t for r, t in built}
    out_dir.mkdir(parents=True, exist_ok=True)
    stem = out_dir / f"{ctx.build_id}.parquet"
    sha = write_sft_parquet(stem, [{"id": r.id, "messages": [m.model_dump() for m in r.messages],
                                    "metadata": r.metadata} for r in rows], METADATA_FIELDS)
    stats_path = stem.with_name(stem.name + ".length_stats.json")
    stats_sha = write_text_atomic(stats_path, json.dumps(length_stats(rows, tokens), indent=2, sort_keys=True) + "\n")
    training_path = out_dir / f"{ctx.build_id}.training.json"
    training_sha = write_text_atomic(training_path, json.dumps(training_config(ctx, stem.name, sha, len(rows)),
                                                               indent=2, sort_keys=True) + "\n")
    counts = {"pairs": len(AdaptStore(wh, ctx.build_id).pairs()), "rows_built": len(built), "rows": len(rows),
              "dropped": len(dropped), "dropped_by_reason": _reasons(dropped)}
    tokenizer = {"name": counter.name, "note": note, "rendering": RENDERING, "max_tokens": budget}
    outputs = {"parquet": {"file": stem.name, "sha256": sha}, "length_stats": {"file": stats_path.name, "sha256": stats_sha},
               "training": {"file": training_path.name, "sha256": training_sha}}
    manifest_path = stem.with_name(stem.name + ".manifest.json")
    manifest = _manifest(ctx, wh, counts, dropped, used, tokenizer, outputs)
    manifest_sha = write_text_atomic(manifest_path, json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    store = AdaptStore(wh, ctx.build_id)
    store.replace_rows([_row_record(r, RowStatus.KEPT if t <= budget else RowStatus.OVER_BUDGET, t, counter.name)
                        for r, t in built])
    store.put_export({"parquet_sha256": sha, "path": str(stem.resolve()), "manifest_sha256": manifest_sha,
                      "stats_sha256": stats_sha, "training_sha256": training_sha, "rows": len(rows),
                      "dropped": len(dropped), "tokenizer": counter.name, "created_at": now_iso()})
    return ExportSummary(build_id=ctx.build_id, parquet=str(stem), parquet_sha256=sha, manifest=str(manifest_path),
                         rows=len(rows), dropped=_reasons(dropped), tokenizer=counter.name, tokenizer_note=note)


def _reasons(dropped: list[dict]) -> dict[str, int]:
    out: dict[str, int] = {}
    for d in dropped:
        out[d["reason"]] = out.get(d["reason"], 0) + 1
    return out


def verify_file(path: Path, sha256: str) -> bool:
    return path.is_file() and file_sha256(path) == sha256
