"""Tokens and the BM25 index: comment stripping, classic BM25 scores, scopes, top-k and thresholds."""

from __future__ import annotations

import math
from collections import Counter

from ptxcore.adapt.retrieval import RepairNotesIndex
from ptxcore.adapt.retrieval.index import K1, B, group_records
from ptxcore.adapt.retrieval.tokens import strip_comments, tokenize
from ptxcore.agent.retrieval_spec import RetrievalScope

from .notes_data import SCALAR_WRONG, TMA_WRONG, WGMMA_WRONG, corpus


def test_comments_go_strings_preprocessor_and_ptx_stay():
    src = ('#include <cuda.h> // header note\n/* block\ncomment */ int x_1 = 2;\n'
           'asm volatile("wgmma.fence.sync.aligned; // inside a string");\nconst char* s = "/* kept */";\n')
    out = strip_comments(src)
    assert "header note" not in out and "block" not in out and "comment */" not in out
    assert "#include <cuda.h>" in out and "// inside a string" in out and '"/* kept */"' in out
    tokens = tokenize(src)
    assert tokens[:3] == ["include", "cuda", "int"] and "x_1" in tokens and "2" in tokens
    assert {"wgmma", "fence", "sync", "aligned", "inside", "kept"} <= set(tokens)
    assert "header" not in tokens and "x" not in tokens  # comments and one-letter names dropped
    assert "s" not in tokenize("int s = 1;") and tokenize("a = 7;") == ["7"]


def _classic_bm25(query: list[str], docs: list[list[str]]) -> list[float]:
    """Textbook BM25 (Robertson numerator, Lucene idf), computed independently of bm25s."""
    n, avg = len(docs), sum(map(len, docs)) / len(docs)
    df = Counter(t for d in docs for t in set(d))
    out = []
    for d in docs:
        tf, score = Counter(d), 0.0
        for t in set(query):
            if tf[t]:
                idf = math.log(1 + (n - df[t] + 0.5) / (df[t] + 0.5))
                score += idf * tf[t] * (K1 + 1) / (tf[t] + K1 * (1 - B + B * len(d) / avg))
        out.append(score)
    return out


def test_scores_are_classic_bm25_over_the_problems_groups():
    """As the authors score (note_feedback.py): a group's document is its wrong kernel once per fix (the sum of its
    records' token vectors), so p1 and p2 (two fixes of one wrong kernel) make it count twice."""
    records = corpus()
    index = RepairNotesIndex(records)
    query = WGMMA_WRONG.replace("m64n128k16", "m64n64k16")
    hits = index.search(query, "mha_with_lse_d128", top_k=5)
    # mha has two distinct wrong kernels (p1 and p2 share one): both score, gemm's TMA kernel is not searched
    assert [h.group.wrong_sha256 for h in hits] == [records[0].wrong_sha256, records[2].wrong_sha256]
    assert [r.pair_id for r in hits[0].group.records] == ["p1", "p2"]
    expected = _classic_bm25(list(dict.fromkeys(tokenize(query))), [tokenize(WGMMA_WRONG) * 2, tokenize(SCALAR_WRONG)])
    once = _classic_bm25(list(dict.fromkeys(tokenize(query))), [tokenize(WGMMA_WRONG), tokenize(SCALAR_WRONG)])
    assert [round(s, 4) for s in expected] != [round(s, 4) for s in once]  # the rule changes the scores
    assert [round(h.score, 4) for h in hits] == [round(s, 4) for s in expected]
    assert [h.rank for h in hits] == [1, 2]


def test_scope_all_top_k_min_score_and_no_zero_hits():
    records = corpus()
    every = RepairNotesIndex(records, RetrievalScope.ALL)
    hits = every.search(TMA_WRONG, "mha_with_lse_d128", top_k=1)
    assert len(hits) == 1 and hits[0].group.problem == "gemm_n7168_k5120"
    same = RepairNotesIndex(records)
    assert same.search(TMA_WRONG, "unknown_problem") == []
    assert same.search("// only a comment\n", "mha_with_lse_d128") == []
    assert same.search("completely unrelated words here", "mha_with_lse_d128") == []  # score 0 is never a hit
    top = same.search(WGMMA_WRONG, "mha_with_lse_d128")[0].score
    assert same.search(WGMMA_WRONG, "mha_with_lse_d128", min_score=top + 1e-9) == []
    assert len(same.search(WGMMA_WRONG, "mha_with_lse_d128", min_score=top)) == 1  # the authors keep score >= min


def test_groups_and_best_fix():
    groups = group_records(corpus())
    assert [len(g.records) for g in groups] == [2, 1, 1]
    assert groups[0].best_fixed.pair_id == "p1"  # speedup 0.4 beats 0.1
    assert groups[1].best_fixed.pair_id == "p3"  # unmeasured, alone
    assert RepairNotesIndex(corpus()).corpus_sha256 == RepairNotesIndex(list(reversed(corpus()))).corpus_sha256
