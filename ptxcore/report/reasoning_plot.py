"""Figure 15: distributions of reasoning length by model, one panel per problem (violin + box, log scale).

The paper's Figure 15 compares the base model, KernelGen s0, Fixit s3 and Gemini 3.1 Pro per problem (s3
lengthens backward-attention reasoning, GEMM medians stay similar). Any grouping can be drawn
(`plot_reasoning_lengths`: panel -> group -> lengths), e.g. the reasoning lengths of an SFT dataset per
synthesizer. Turns that report 0 reasoning tokens (providers that return none) are left out and counted.
"""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from collections.abc import Mapping, Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from ptxcore.metrics import TurnOutcome  # noqa: E402
from ptxcore.schema import FrozenModel  # noqa: E402

from .subsets import natural_key  # noqa: E402

ALL_PROBLEMS = "all problems"
Lengths = Mapping[str, Mapping[str, Sequence[int]]]
"""panel -> group (model) -> lengths."""


class LengthSummary(FrozenModel):
    """Summary of one group's lengths in one panel."""

    panel: str
    """Problem (or `all problems`)."""
    group: str
    """Model (or synthesizer) name."""
    n: int
    """Lengths drawn."""
    n_zero: int
    """Lengths of 0 left out."""
    median: float | None
    """Median (None when nothing is drawn)."""
    p90: float | None
    """90th percentile (nearest rank)."""
    maximum: int | None
    """Largest."""


def lengths_by_problem(outcomes: Sequence[TurnOutcome]) -> dict[str, dict[str, list[int]]]:
    """Reasoning tokens of every turn: problem -> model -> lengths, plus an `all problems` panel."""
    out: dict[str, dict[str, list[int]]] = defaultdict(lambda: defaultdict(list))
    for o in outcomes:
        out[o.definition][o.model].append(int(o.reasoning_tokens))
        out[ALL_PROBLEMS][o.model].append(int(o.reasoning_tokens))
    return {p: dict(g) for p, g in out.items()}


def summarize(lengths: Lengths) -> list[LengthSummary]:
    """Per panel (problems in name order, `all problems` last) and group (natural order: s2 before s10)."""
    out = []
    for panel in sorted(lengths, key=lambda p: (p == ALL_PROBLEMS, p)):
        for name in sorted(lengths[panel], key=natural_key):
            raw = lengths[panel][name]
            values = sorted(v for v in raw if v > 0)
            p90 = values[min(len(values) - 1, math.ceil(0.9 * len(values)) - 1)] if values else None
            out.append(LengthSummary(panel=panel, group=name, n=len(values), n_zero=len(raw) - len(values),
                                     median=statistics.median(values) if values else None,
                                     p90=float(p90) if p90 is not None else None,
                                     maximum=values[-1] if values else None))
    return out


def _panel(ax, title: str, groups: Mapping[str, Sequence[int]], ylim: tuple[float, float]) -> None:
    names = [n for n in sorted(groups, key=natural_key) if any(v > 0 for v in groups[n])]
    data = [[math.log10(v) for v in groups[n] if v > 0] for n in names]
    if data:
        for body in ax.violinplot(data, showextrema=False, widths=0.85)["bodies"]:
            body.set_alpha(0.35)
        ax.boxplot(data, widths=0.2, showfliers=False, medianprops={"color": "k"})
        for i, n in enumerate(names, start=1):
            median = statistics.median(v for v in groups[n] if v > 0)
            ax.annotate(f"{median:,.0f}", (i, math.log10(median)), xytext=(10, 0), textcoords="offset points",
                        fontsize=6.5, va="center")
    ax.set_xticks(range(1, len(names) + 1), [n.replace(" + ", "\n+ ") for n in names], rotation=35, ha="right",
                  fontsize=7)
    ax.set_yticks(list(range(0, 8)), [f"$10^{t}$" for t in range(0, 8)])
    ax.set_ylim(*ylim)
    ax.set_title(title, fontsize=9)
    ax.grid(axis="y", alpha=0.3)


def plot_reasoning_lengths(lengths: Lengths, path: Path, title: str = "Reasoning length by model",
                           unit: str = "reasoning tokens per turn") -> Path:
    """One panel per problem (and `all problems`), a violin + box per group with its median written beside it."""
    panels = sorted(lengths, key=lambda p: (p == ALL_PROBLEMS, p)) or [ALL_PROBLEMS]
    cols = min(3, len(panels))
    rows = math.ceil(len(panels) / cols)
    width = max(4.2, 0.75 * max((len(g) for g in lengths.values()), default=1) + 1.6)
    fig, axes = plt.subplots(rows, cols, figsize=(width * cols, 3.6 * rows), squeeze=False)
    flat = [ax for row in axes for ax in row]
    logs = [math.log10(v) for g in lengths.values() for vs in g.values() for v in vs if v > 0] or [1.0, 5.0]
    ylim = (max(0.0, math.floor(min(logs)) - 0.2), math.ceil(max(logs)) + 0.2)
    for ax, panel in zip(flat, panels, strict=False):
        _panel(ax, panel, lengths.get(panel, {}), ylim)
    for ax in flat[len(panels):]:
        ax.set_visible(False)
    for row in axes:
        row[0].set_ylabel(f"{unit} (log)", fontsize=8)
    fig.suptitle(title, fontsize=11)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return Path(path)
