"""Repair retrieval for a campaign: load its notes corpus and build the feedback augmenter (Table 4 conditions).

File notes are read (and refused with one line) before the campaign writes anything; a warehouse
collection (`notes: warehouse:<collection>`) is read on the writer thread, which owns the warehouse.
"""

from __future__ import annotations

from pathlib import Path

from ptxcore.adapt.retrieval import (
    NoteRecord,
    RepairRetrievalAugmenter,
    build_augmenter,
    load_campaign_notes,
    read_warehouse_notes,
)
from ptxcore.agent import CampaignConfig

from .writer import RecordWriter


def file_notes(config: CampaignConfig, config_path: str | Path) -> list[NoteRecord] | None:
    """The campaign's notes when they come from a file (validated); None otherwise."""
    spec = config.repair_retrieval
    return load_campaign_notes(spec, Path(config_path)) if spec is not None else None


def campaign_augmenter(config: CampaignConfig, notes: list[NoteRecord] | None,
                       writer: RecordWriter) -> RepairRetrievalAugmenter | None:
    """The augmenter of the campaign's condition (None when the campaign has no repair_retrieval key)."""
    spec = config.repair_retrieval
    if spec is None:
        return None
    collection = spec.warehouse_collection
    if collection is not None and notes is None:
        notes = writer.call(lambda wh, tracker: read_warehouse_notes(wh, collection))
    return build_augmenter(spec, notes)
