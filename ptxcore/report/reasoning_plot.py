"""Figure 15: distributions of reasoning length by model (one violin + box per model, log scale).

Any grouping of lengths can be drawn (`plot_reasoning_lengths`): per evaluated model from the turns'
reasoning tokens (`lengths_by_model`), or per synthesizer from an SFT dataset's reasoning lengths. Turns
that report 0 reasoning tokens (providers that return none) are left out and counted in the caption.
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


class LengthSummary(FrozenModel):
    """Summary of one group's lengths (what the figure annotates and the report tabulates)."""

    group: str
    """Model (or synthesizer) name."""
    n: int
    """Lengths drawn."""
    n_zero: int
    """Lengths of 0 left out."""
    median: float | None
    """Median (None when nothing is drawn)."""
    p90: float | None
    """90th percentile."""
    maximum: int | None
    """Largest."""


def lengths_by_model(outcomes: Sequence[TurnOutcome]) -> dict[str, list[int]]:
    """Reasoning tokens of every turn, per model (zeros kept: `summarize` counts them)."""
    out: dict[str, list[int]] = defaultdict(list)
    for o in outcomes:
        out[o.model].append(int(o.reasoning_tokens))
    return dict(out)


def summarize(groups: Mapping[str, Sequence[int]]) -> list[LengthSummary]:
    """Per group, in natural order of the names (s2 before s10)."""
    out = []
    for name in sorted(groups, key=natural_key):
        values = sorted(v for v in groups[name] if v > 0)
        n_zero = sum(1 for v in groups[name] if v <= 0)
        p90 = values[min(len(values) - 1, math.ceil(0.9 * len(values)) - 1)] if values else None
        out.append(LengthSummary(group=name, n=len(values), n_zero=n_zero,
                                 median=statistics.median(values) if values else None,
                                 p90=float(p90) if p90 is not None else None, maximum=values[-1] if values else None))
    return out


def plot_reasoning_lengths(groups: Mapping[str, Sequence[int]], path: Path, title: str = "Reasoning length by model",
                           unit: str = "reasoning tokens per turn") -> Path:
    """Violin + box per group on a log axis, with n and the median written under each."""
    summary = [s for s in summarize(groups) if s.n > 0]
    names = [s.group for s in summary]
    data = [[math.log10(v) for v in groups[n] if v > 0] for n in names]
    fig, ax = plt.subplots(figsize=(max(6.0, 1.15 * len(names) + 2.0), 4.8))
    if data:
        parts = ax.violinplot(data, showextrema=False, widths=0.85)
        for body in parts["bodies"]:
            body.set_alpha(0.35)
        ax.boxplot(data, widths=0.18, showfliers=False, medianprops={"color": "k"})
        ax.set_xticks(range(1, len(names) + 1), [n.replace(" + ", "\n+ ") for n in names], rotation=30, ha="right",
                      fontsize=8)
        for i, s in enumerate(summary, start=1):
            ax.annotate(f"n={s.n}\nmed {s.median:,.0f}", (i, math.log10(s.median)), xytext=(14, 0),
                        textcoords="offset points", fontsize=7, va="center")
    ticks = range(0, 7)
    ax.set_yticks(list(ticks), [f"$10^{t}$" for t in ticks])
    lo = min((min(d) for d in data if d), default=0.0)
    hi = max((max(d) for d in data if d), default=6.0)
    ax.set_ylim(max(0.0, math.floor(lo) - 0.2), math.ceil(hi) + 0.2)
    ax.set(ylabel=f"{unit} (log scale)", title=title)
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return Path(path)
