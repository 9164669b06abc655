"""Notes corpora: JSONL files (one `NoteRecord` per line) and warehouse collections; the augmenter factory.

A campaign file names its notes (`repair_retrieval.notes`) and is untrusted input. A relative path is
resolved against the campaign file's directory; the resolved file (symlinks followed) must lie inside
that directory or inside one of the directories in $PTXBENCH_NOTES_DIRS (os.pathsep-separated). Errors
are one line naming the file (and line) and raise CampaignConfigError, so every command that already
reports campaign-file errors reports these the same way.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from ptxcore.agent.campaign import CampaignConfigError
from ptxcore.agent.retrieval_spec import RepairRetrievalSpec
from ptxcore.schema import RetrievalCondition
from ptxcore.schema.files import InputFileError, read_text

from .augmenter import RepairRetrievalAugmenter
from .index import RepairNotesIndex
from .models import NoteRecord

NOTES_DIRS_ENV = "PTXBENCH_NOTES_DIRS"
"""Extra directories a campaign's notes file may live in."""
MAX_NOTES_FILE_BYTES = 256 * 1024 * 1024
"""Largest notes file read (each record holds two kernels)."""
MAX_RECORDS = 100_000
"""Most records in one corpus."""


class NotesSourceError(CampaignConfigError):
    """The notes of a campaign cannot be used (one line naming the file, line and problem)."""


def allowed_roots(campaign_file: Path | None) -> list[Path]:
    """Directories a notes file may resolve into."""
    roots = [Path(campaign_file).resolve().parent] if campaign_file is not None else []
    roots += [Path(p).resolve() for p in os.environ.get(NOTES_DIRS_ENV, "").split(os.pathsep) if p.strip()]
    return roots


def resolve_notes_path(ref: str, campaign_file: Path | None) -> Path:
    """The notes file a campaign names, refused unless it resolves inside an allowed directory."""
    raw = Path(ref)
    base = Path(campaign_file).resolve().parent if campaign_file is not None else Path.cwd()
    path = (raw if raw.is_absolute() else base / raw).resolve()
    roots = allowed_roots(campaign_file)
    if not any(path.is_relative_to(r) for r in roots):
        where = ", ".join(str(r) for r in roots) or "none"
        raise NotesSourceError(f"repair_retrieval.notes: {ref} resolves to {path}, outside the allowed "
                               f"directories ({where}; add one to ${NOTES_DIRS_ENV})")
    if not path.is_file():
        raise NotesSourceError(f"repair_retrieval.notes: no such notes file: {path}")
    if path.stat().st_size > MAX_NOTES_FILE_BYTES:
        raise NotesSourceError(f"{path}: notes file larger than {MAX_NOTES_FILE_BYTES} bytes")
    return path


def _validation_line(where: str, exc: ValidationError) -> str:
    first = exc.errors()[0]
    key = ".".join(str(p) for p in first["loc"]) or "(top level)"
    return f"{where}: {key}: {first['msg']}"


def parse_note_lines(lines: Iterable[str], where: str) -> list[NoteRecord]:
    """Records from JSONL lines; blank lines are skipped; the first bad line raises NotesSourceError."""
    records = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            data = json.loads(line)
        except json.JSONDecodeError as exc:
            raise NotesSourceError(f"{where}:{number}: invalid JSON: {exc.msg} (column {exc.colno})") from None
        except ValueError:  # a number of more than 4300 digits
            raise NotesSourceError(f"{where}:{number}: invalid JSON: a number too long to convert") from None
        try:
            records.append(NoteRecord.model_validate(data))
        except ValidationError as exc:
            raise NotesSourceError(_validation_line(f"{where}:{number}", exc)) from None
        if len(records) > MAX_RECORDS:
            raise NotesSourceError(f"{where}: more than {MAX_RECORDS} note records")
    if not records:
        raise NotesSourceError(f"{where}: no note records")
    return records


def read_notes_file(path: Path) -> list[NoteRecord]:
    """Records of a notes JSONL file."""
    try:
        text = read_text(path, MAX_NOTES_FILE_BYTES)
    except InputFileError as exc:
        raise NotesSourceError(str(exc)) from None
    return parse_note_lines(text.splitlines(), str(path))


def write_notes_file(records: Sequence[NoteRecord], path: Path) -> Path:
    """Write records as JSONL (atomically: a temporary file renamed into place)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text("".join(r.model_dump_json() + "\n" for r in records), encoding="utf-8")
    tmp.replace(path)
    return path


def load_campaign_notes(spec: RepairRetrievalSpec, campaign_file: Path | None) -> list[NoteRecord] | None:
    """The file-based notes of a campaign; None when the spec needs none or names a warehouse collection."""
    if spec.mode is RetrievalCondition.NONE or spec.notes is None or spec.warehouse_collection is not None:
        return None
    return read_notes_file(resolve_notes_path(spec.notes, campaign_file))


def build_augmenter(spec: RepairRetrievalSpec, records: Sequence[NoteRecord] | None) -> RepairRetrievalAugmenter:
    """The augmenter of a campaign's condition, its index built from `records` (none for mode none)."""
    if spec.mode is RetrievalCondition.NONE:
        return RepairRetrievalAugmenter(spec, None, spec.notes or "")
    if not records:
        raise NotesSourceError(f"repair_retrieval.notes: {spec.notes}: no note records")
    return RepairRetrievalAugmenter(spec, RepairNotesIndex(records, spec.scope), spec.notes or "")


def note_rows(collection_id: str, records: Sequence[NoteRecord]) -> list[dict[str, object]]:
    """Rows of the warehouse table `repair_notes` (write with `Warehouse.upsert_rows("repair_notes", rows)`)."""
    return [{
        "collection_id": collection_id, "pair_id": r.pair_id, "problem": r.problem, "arch": r.arch,
        "prompt_variant": r.prompt_variant, "wrong_sha256": r.wrong_sha256, "fixed_sha256": r.fixed_sha256,
        "fixed_speedup": r.fixed_speedup, "n_notes": len(r.instruction_notes), "teacher_model": r.teacher_model,
        "record_sha256": r.sha256, "raw_json": r.model_dump_json(),
    } for r in records]


NOTES_QUERY = "SELECT raw_json FROM repair_notes WHERE collection_id = ? ORDER BY pair_id"
"""The records of one collection, in a stable order."""


def read_warehouse_notes(wh: Any, collection_id: str) -> list[NoteRecord]:
    """Records of a warehouse collection (`wh` is a ptxcore.warehouse.Warehouse)."""
    _, rows = wh.sql(NOTES_QUERY, [collection_id])
    where = f"warehouse:{collection_id}"
    if not rows:
        raise NotesSourceError(f"repair_retrieval.notes: {where}: no such notes collection in {wh.path}")
    return parse_note_lines((r[0] for r in rows), where)
