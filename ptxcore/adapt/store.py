"""The adapt tables as typed records, over the Warehouse's public row API (no SQL text here).

A record with nested turn references (source, correct) is one flat row: `source_campaign_id`, ...
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any, TypeVar

from pydantic import BaseModel

from ptxcore.warehouse import Warehouse

from .models import PairRecord, ReasoningRecord, RepairRecord, SelectionOutcome, SelectionRecord, TurnRef

M = TypeVar("M", bound=BaseModel)
_NESTED = {"source": TurnRef, "correct": TurnRef}


def flat(record: BaseModel) -> dict[str, Any]:
    """One row: nested turn references spread into prefixed columns, enums as their values."""
    out: dict[str, Any] = {}
    for key, value in record.model_dump(mode="json").items():
        if key in _NESTED:
            out.update({f"{key}_{k}": v for k, v in value.items()})
        else:
            out[key] = value
    return out


def unflat(model: type[M], row: dict[str, Any]) -> M:
    data: dict[str, Any] = {}
    for name in model.model_fields:
        if name in _NESTED:
            data[name] = {k: row.get(f"{name}_{k}") for k in _NESTED[name].model_fields}
            data[name] = {k: v for k, v in data[name].items() if v is not None}
        elif row.get(name) is not None:
            data[name] = row[name]
    return model.model_validate(data)


class AdaptStore:
    """Typed access to one build's rows in a warehouse."""

    def __init__(self, wh: Warehouse, build_id: str) -> None:
        self.wh, self.build_id = wh, build_id

    def _load(self, table: str, model: type[M], order: tuple[str, ...], **match: Any) -> list[M]:
        return [unflat(model, r) for r in self.wh.rows(table, {"build_id": self.build_id, **match}, order)]

    # -- build ------------------------------------------------------------------------------------
    def build(self) -> dict[str, Any] | None:
        rows = self.wh.rows("adapt_builds", {"build_id": self.build_id})
        return rows[0] if rows else None

    def put_build(self, row: dict[str, Any]) -> None:
        self.wh.upsert_rows("adapt_builds", [{**row, "build_id": self.build_id}])

    # -- stages -----------------------------------------------------------------------------------
    def replace_selection(self, records: list[SelectionRecord]) -> None:
        self.wh.replace_where("adapt_selections", {"build_id": self.build_id}, [flat(r) for r in records])

    def selections(self, outcome: SelectionOutcome | None = None) -> list[SelectionRecord]:
        match = {"outcome": outcome.value} if outcome is not None else {}
        return self._load("adapt_selections", SelectionRecord, ("item_id",), **match)

    def put_repairs(self, records: list[RepairRecord]) -> None:
        self.wh.upsert_rows("adapt_repairs", [flat(r) for r in records])

    def repairs(self) -> list[RepairRecord]:
        return self._load("adapt_repairs", RepairRecord, ("item_id",))

    def replace_pairs(self, records: list[PairRecord]) -> None:
        self.wh.replace_where("adapt_pairs", {"build_id": self.build_id}, [flat(r) for r in records])

    def pairs(self, kept_only: bool = False) -> list[PairRecord]:
        match = {"status": "kept"} if kept_only else {}
        return self._load("adapt_pairs", PairRecord, ("pair_id",), **match)

    def add_reasoning(self, record: ReasoningRecord, prompt_text: str) -> None:
        self.add_reasoning_many([(record, prompt_text)])

    def add_reasoning_many(self, items: list[tuple[ReasoningRecord, str]]) -> None:
        """Store synthesizer calls and their prompts: two transactions for the whole batch."""
        texts = [{"sha256": r.prompt_sha256, "text": t} for r, t in items if r.prompt_sha256]
        if texts:
            self.wh.insert_missing("adapt_texts", texts)
        if items:
            self.wh.upsert_rows("adapt_reasoning", [flat(r) for r, _ in items])

    def reasoning(self) -> list[ReasoningRecord]:
        return self._load("adapt_reasoning", ReasoningRecord, ("pair_id", "attempt"))

    def text(self, sha256: str) -> str | None:
        rows = self.wh.rows("adapt_texts", {"sha256": sha256})
        return rows[0]["text"] if rows else None

    def replace_rows(self, rows: list[dict[str, Any]]) -> None:
        self.replace_rows_batches([rows])

    def replace_rows_batches(self, batches: Iterable[list[dict[str, Any]]]) -> int:
        """Replace the build's rows with rows that arrive in batches (one transaction)."""
        return self.wh.replace_where_batches("adapt_rows", {"build_id": self.build_id},
                                             ([{**r, "build_id": self.build_id} for r in b] for b in batches))

    def rows(self) -> list[dict[str, Any]]:
        return self.wh.rows("adapt_rows", {"build_id": self.build_id}, ("row_id",))

    def put_export(self, row: dict[str, Any]) -> None:
        self.wh.upsert_rows("adapt_exports", [{**row, "build_id": self.build_id}])

    def exports(self) -> list[dict[str, Any]]:
        return self.wh.rows("adapt_exports", {"build_id": self.build_id}, ("created_at",))


def dumps(value: Any) -> str:
    """Canonical JSON (sorted keys) for stored payloads."""
    return json.dumps(value, ensure_ascii=False, sort_keys=True)
