"""BM25 over historical wrong kernels (bm25s), grouped: one document per distinct wrong kernel.

A *group* is one historical wrong kernel with every note record distilled from its fixes (a wrong kernel
repaired several ways gives several records). The document of a group is the token list of its
comment-stripped source (`tokens.tokenize`) once per fix, as the authors build it (note_feedback.py,
_build_groups: the group's vector is the sum of its records' vectors, so a wrong kernel fixed three ways has three
times the term frequencies and length). Retrieval for a failing turn: the current kernel is the query (its
distinct tokens), groups are scored with BM25 (k1 = 1.5, b = 0.75, the Lucene idf
log(1 + (N - df + 0.5) / (df + 0.5))), and the best `top_k` groups scoring at least `min_score` and above 0
come back (the authors' `score >= min_similarity and score > 0`). With scope `same-problem` the index, and so N, df and the average length, covers only the
groups of the problem under test, as in the reference implementation; with `all`, every group.

bm25s's "lucene" scorer leaves out the constant (k1 + 1) of the classic numerator; scores here are
multiplied back by it, so they equal the classic formula (rankings are the same either way).
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Sequence

from pydantic import Field

from ptxcore.agent.retrieval_spec import RetrievalScope
from ptxcore.schema import FrozenModel, text_sha256

from .models import NoteRecord
from .tokens import tokenize

log = logging.getLogger(__name__)

K1 = 1.5
"""BM25 term-frequency saturation."""
B = 0.75
"""BM25 length normalisation."""
_ALL = "*"


class NoteGroup(FrozenModel):
    """One historical wrong kernel and the note records of its fixes."""

    wrong_sha256: str
    """sha256 of the wrong kernel."""
    problem: str
    """Its problem."""
    records: list[NoteRecord] = Field(min_length=1)
    """Records distilled from its fixes, in corpus order."""

    @property
    def best_fixed(self) -> NoteRecord:
        """The fix with the highest speedup (unmeasured ones last; ties: the first in corpus order)."""
        return max(self.records, key=lambda r: -1.0 if r.fixed_speedup is None else r.fixed_speedup)


class Hit(FrozenModel):
    """A retrieved group."""

    rank: int = Field(ge=1)
    """1-based rank."""
    score: float
    """BM25 score (classic scale)."""
    group: NoteGroup
    """The group."""


def group_records(records: Sequence[NoteRecord]) -> list[NoteGroup]:
    """Groups by wrong kernel, in order of first appearance."""
    by_wrong: dict[str, list[NoteRecord]] = defaultdict(list)
    for r in records:
        by_wrong[r.wrong_sha256].append(r)
    return [NoteGroup(wrong_sha256=sha, problem=rs[0].problem, records=rs) for sha, rs in by_wrong.items()]


class _Shard:
    """One bm25s index over some groups."""

    def __init__(self, groups: list[NoteGroup]) -> None:
        import bm25s  # here, not at import: a campaign without repair retrieval needs no bm25s (the GPU image has none)

        self.groups = groups
        self.bm25 = bm25s.BM25(method="lucene", k1=K1, b=B)
        self.bm25.index([tokenize(g.records[0].wrong_kernel) * len(g.records) for g in groups], show_progress=False)

    def scores(self, query: list[str]) -> list[float]:
        return [float(s) * (K1 + 1.0) for s in self.bm25.get_scores(query)]


class RepairNotesIndex:
    """The retrieval index of a notes corpus (built once per campaign, then read-only)."""

    def __init__(self, records: Sequence[NoteRecord], scope: RetrievalScope = RetrievalScope.SAME_PROBLEM) -> None:
        self.scope = scope
        self.groups = group_records(records)
        self.corpus_sha256 = self.corpus_identity(records)
        shards: dict[str, list[NoteGroup]] = defaultdict(list)
        for g in self.groups:
            shards[g.problem if scope is RetrievalScope.SAME_PROBLEM else _ALL].append(g)
        self._shards = {key: _Shard(gs) for key, gs in shards.items()}
        log.info("repair-notes index: %d records, %d wrong kernels, %d shards (%s)", len(records),
                 len(self.groups), len(self._shards), scope.value)

    @staticmethod
    def corpus_identity(records: Sequence[NoteRecord]) -> str:
        """sha256 over the records' hashes (order-free): what a turn's augmentation records as its source."""
        return text_sha256("\n".join(sorted(r.sha256 for r in records)))

    def search(self, kernel: str, problem: str, top_k: int = 3, min_score: float = 0.0) -> list[Hit]:
        """The best `top_k` groups for a kernel (as the query) of `problem`; empty when nothing scores above 0."""
        shard = self._shards.get(problem if self.scope is RetrievalScope.SAME_PROBLEM else _ALL)
        query = list(dict.fromkeys(tokenize(kernel)))
        if shard is None or not query:
            return []
        scored = [(s, i) for i, s in enumerate(shard.scores(query)) if s >= min_score and s > 0.0]
        scored.sort(key=lambda si: (-si[0], si[1]))
        return [Hit(rank=n, score=s, group=shard.groups[i]) for n, (s, i) in enumerate(scored[:top_k], start=1)]
