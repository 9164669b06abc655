"""The campaign key `repair_retrieval`: which Table 4 condition the campaign's trajectories run under.

```yaml
repair_retrieval:
  mode: notes                 # none | notes | notes+fixed  (notes+fixed is an ORACLE condition)
  notes: notes/mha.jsonl      # a notes JSONL file, or warehouse:<collection> (the campaign's warehouse)
  top_k_groups: 3             # historical wrong kernels retrieved per failing turn
  max_notes: 8                # instruction notes appended per failing turn
```

Campaign files are untrusted input. A file path must be relative (to the campaign file's directory) or
absolute inside a directory listed in PTXBENCH_NOTES_DIRS; it may not climb with `..`. Whether the file
really resolves inside an allowed directory (symlinks included) is checked when the notes are loaded
(`ptxcore.adapt.retrieval.source`), because only then is the campaign file's directory known.
"""

from __future__ import annotations

import re
from enum import StrEnum
from pathlib import PurePosixPath

from pydantic import Field, field_validator, model_validator

from ptxcore.schema import FrozenModel, RetrievalCondition

WAREHOUSE_NOTES_PREFIX = "warehouse:"
"""`notes: warehouse:<collection>` reads the notes of that collection from the campaign's warehouse."""
_COLLECTION = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.\-]{0,127}")
_NOTES_SUFFIXES = (".jsonl",)


class RetrievalScope(StrEnum):
    """Which historical wrong kernels a failing turn may retrieve."""

    SAME_PROBLEM = "same-problem"
    """Only those of the problem under test (the reference implementation's default)."""
    ALL = "all"
    """Any problem in the notes corpus."""


class RepairRetrievalSpec(FrozenModel):
    """The `repair_retrieval` block of a campaign file."""

    mode: RetrievalCondition
    """none | notes | notes+fixed (the last one shows a verified solution of the same problem: ORACLE)."""
    notes: str | None = None
    """Notes corpus: a `.jsonl` path, or `warehouse:<collection>`; required unless mode is none."""
    top_k_groups: int = Field(default=3, ge=1, le=20)
    """Historical wrong kernels (groups) retrieved per failing turn."""
    max_notes: int = Field(default=8, ge=1, le=32)
    """Instruction notes appended per failing turn, at most."""
    min_score: float = Field(default=0.0, ge=0.0)
    """Groups scoring below this BM25 score are not retrieved (a score of 0 never is; the authors keep score >= it)."""
    scope: RetrievalScope = RetrievalScope.SAME_PROBLEM
    """Which historical kernels are searched."""

    @field_validator("notes")
    @classmethod
    def _notes_ref(cls, v: str | None) -> str | None:
        if v is None:
            return None
        if any(c in v for c in "\x00\r\n"):
            raise ValueError("control characters in the notes reference")
        if v.startswith(WAREHOUSE_NOTES_PREFIX):
            if not _COLLECTION.fullmatch(v.removeprefix(WAREHOUSE_NOTES_PREFIX)):
                raise ValueError("warehouse:<collection> needs a collection id of letters, digits, '_', '-', '.'")
            return v
        path = PurePosixPath(v.replace("\\", "/"))
        if ".." in path.parts:
            raise ValueError(f"{v}: '..' is not allowed in the notes path")
        if path.suffix not in _NOTES_SUFFIXES:
            raise ValueError(f"{v}: the notes file must be a .jsonl file (or warehouse:<collection>)")
        return v

    @model_validator(mode="after")
    def _notes_needed(self) -> RepairRetrievalSpec:
        if self.mode is not RetrievalCondition.NONE and self.notes is None:
            raise ValueError(f"mode {self.mode.value} needs `notes` (a .jsonl file or warehouse:<collection>)")
        return self

    @property
    def warehouse_collection(self) -> str | None:
        """The collection id when the notes come from the warehouse."""
        if self.notes and self.notes.startswith(WAREHOUSE_NOTES_PREFIX):
            return self.notes.removeprefix(WAREHOUSE_NOTES_PREFIX)
        return None
