"""Which of the authors' published runs (`ptxbench warehouse import-ptxbench`) make the paper's adapt tables.

Run ids are the exp_dir names of data/ptxbench/ptxbench_per_turn.csv.gz. The SFT checkpoints were evaluated
on the five primary Hopper problems with the expert-guided ("MHA-patched") prompts, so their base is
Qwen3.6-27B's patched MHA runs plus its GEMM run (GEMM has no patched variant). s1's extra runs
(unpatched MHA, d64 / d96 / GQA generalization) are not part of Tables 8 / 9.
"""

from __future__ import annotations

_FIVE = ("gemm", "mha-d128", "mha-d128-causal", "mha-bwd-d128", "mha-bwd-d128-causal")

PUBLISHED_SFT_RUNS: dict[str, list[str]] = {
    "Qwen3.6-27B": ["qwen36-27b-nopatched-gemm", "qwen36-27b-mha-d128", "qwen36-27b-mha-d128-causal",
                    "qwen36-27b-mha-bwd-d128", "qwen36-27b-mha-bwd-d128-causal"],
    **{f"Qwen3.6-27B-{s}": [f"{prefix}-{p}" for p in _FIVE] for s, prefix in (
        ("s0", "2026-0624-1022"), ("s1", "2026-0624-0939"), ("s2", "2026-0629-2229"), ("s3", "2026-0626-0012"),
        ("s4", "2026-0712-0058"), ("s5", "2026-0716-1808-full"), ("s6", "2026-0721-1837-fixit-v6-full-patched"))},
}
"""Model -> its runs for Tables 8 / 9."""

PUBLISHED_RETRIEVAL_RUNS: list[str] = [
    *PUBLISHED_SFT_RUNS["Qwen3.6-27B"][1:],
    *PUBLISHED_SFT_RUNS["Qwen3.6-27B-s1"][1:],
    *(f"qwen36-27b-retrieved-notes-3prompt-{p}" for p in _FIVE[1:]),
    *(f"qwen36-27b-note-feedback2-3prompt-{p}" for p in _FIVE[1:]),
]
"""Table 4: the base model, its two retrieval conditions and the SFT checkpoint s1 on the four d128 MHA problems
(the paper's rows "w/o expert guidance", the unpatched-prompt runs, are left out: they would share a cell with the
patched runs of the same model)."""

PUBLISHED_FIGURE15_RUNS: list[str] = [
    *PUBLISHED_SFT_RUNS["Qwen3.6-27B"], *PUBLISHED_SFT_RUNS["Qwen3.6-27B-s0"], *PUBLISHED_SFT_RUNS["Qwen3.6-27B-s3"],
    *(f"gemini-31-pro-{p}" for p in _FIVE),
]
"""Figure 15: the base model, KernelGen s0, Fixit s3 and Gemini 3.1 Pro, on the five primary Hopper problems."""

PUBLISHED_SUBSET = "paper"
"""The paper's cells are over 3 of the 5 prompt variants of the 20-trajectory runs, per problem (subsets.py)."""


def published_sft_runs() -> list[str]:
    return [r for runs in PUBLISHED_SFT_RUNS.values() for r in runs]
