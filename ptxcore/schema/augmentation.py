"""What a feedback augmenter added to a turn's feedback (repair retrieval, Table 4 conditions).

Recorded per turn (warehouse table `turn_augmentations`), so a turn says under which condition it was
played and exactly which historical items were shown to the model.
"""

from __future__ import annotations

from enum import StrEnum

from pydantic import Field

from .base import FrozenModel


class RetrievalCondition(StrEnum):
    """The repair-retrieval condition a trajectory runs under (the rows of the paper's Table 4)."""

    NONE = "none"
    """Plain feedback (the baseline)."""
    NOTES = "notes"
    """Feedback plus repair notes retrieved from similar historical wrong kernels."""
    NOTES_FIXED = "notes+fixed"
    """Notes plus the best verified fixed kernel of the same problem: an ORACLE condition (it shows a
    correct solution of the problem under test)."""

    @property
    def oracle(self) -> bool:
        """True when the condition shows the model a verified solution of the same problem."""
        return self is RetrievalCondition.NOTES_FIXED

    @property
    def label(self) -> str:
        """Human label, with the oracle marked."""
        return {"none": "none", "notes": "notes", "notes+fixed": "notes+fixed (ORACLE)"}[self.value]


class AugmentationStatus(StrEnum):
    """What the augmenter did on one turn."""

    APPENDED = "appended"
    """Retrieved items were appended to the feedback."""
    NO_MATCH = "no_match"
    """A failing turn, but nothing in the index scored above the threshold."""
    NOT_FAILING = "not_failing"
    """The turn passed, or was not judged (NOT_EVALUATED / INFRA_ERROR): nothing is retrieved."""
    NO_KERNEL = "no_kernel"
    """The answer had no extractable kernel to use as the query."""
    DISABLED = "disabled"
    """Condition `none`: retrieval is off (recorded so the condition is explicit)."""


class ItemKind(StrEnum):
    """Kinds of retrieved items."""

    GROUP = "group"
    """A historical wrong kernel (a retrieval hit) with its BM25 score."""
    NOTE = "note"
    """One instruction note shown to the model."""
    FIXED_KERNEL = "fixed_kernel"
    """A verified fixed kernel shown to the model (oracle)."""


class RetrievedItem(FrozenModel):
    """One item shown to the model."""

    kind: ItemKind
    """What it is."""
    ref: str = Field(min_length=1)
    """Identity: the wrong kernel's sha256 (group), the note's sha256 (note), the fixed kernel's sha256."""
    rank: int = Field(ge=1)
    """1-based rank of the group it came from."""
    score: float | None = None
    """BM25 score of the group (None for notes and kernels: see their group)."""
    problem: str = ""
    """Problem of the historical pair."""
    pair_id: str = ""
    """The (wrong, fixed) pair the note or kernel was distilled from ('' for a group)."""


class FeedbackAugmentation(FrozenModel):
    """The augmenter's record for one turn."""

    condition: RetrievalCondition
    """Condition of the trajectory."""
    status: AugmentationStatus
    """What happened on this turn."""
    source: str = ""
    """Where the notes came from: a file path or `warehouse:<collection>`."""
    source_sha256: str = ""
    """Content hash of the notes corpus (the sorted note-record hashes)."""
    items: list[RetrievedItem] = Field(default_factory=list)
    """Groups, notes and kernels shown, in the order they were appended."""
    appended_chars: int = Field(default=0, ge=0)
    """Characters appended to the feedback."""

    @property
    def oracle(self) -> bool:
        return self.condition.oracle

    @property
    def n_notes(self) -> int:
        return sum(i.kind is ItemKind.NOTE for i in self.items)
