"""Repair retrieval (paper Table 4): notes distilled from (wrong, fixed) pairs, BM25 over historical wrong
kernels, and the feedback augmenter that appends retrieved notes to failing turns.

Conditions: `none`, `notes`, `notes+fixed` (ORACLE: shows a verified solution of the same problem).
"""

from .augmenter import RepairRetrievalAugmenter, is_failing
from .distill import NoteFailure, NotesCollection, collect_notes, distill_messages, parse_notes
from .index import Hit, NoteGroup, RepairNotesIndex
from .models import DistilledNotes, InstructionNote, NoteRecord, RepairPair, TurnRef, repair_pair_from_turns
from .source import (
    NotesSourceError,
    build_augmenter,
    load_campaign_notes,
    note_rows,
    read_notes_file,
    read_warehouse_notes,
    resolve_notes_path,
    write_notes_file,
)

__all__ = [
    "RepairRetrievalAugmenter", "is_failing", "NoteFailure", "NotesCollection", "collect_notes", "distill_messages",
    "parse_notes", "Hit", "NoteGroup", "RepairNotesIndex", "DistilledNotes", "InstructionNote", "NoteRecord",
    "RepairPair", "TurnRef", "repair_pair_from_turns", "NotesSourceError", "build_augmenter", "load_campaign_notes", "note_rows",
    "read_notes_file", "read_warehouse_notes", "resolve_notes_path", "write_notes_file",
]
