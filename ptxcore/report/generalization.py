"""Figure 6 style: the generalization problems (attention at head dimension 64 and 96, and the GQA workloads).

One table and one figure at the turn limit k (default 8), per problem and per (model, arch): the rate of
correct turns whose target instructions executed, and the best speedup over those turns, with the d128
problem each attention variant generalizes from beside it when the campaign has it. Problems are grouped by
family from their names (`_d64`, `_d96`, `gqa_`), so that this module needs no problem catalog.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from ptxcore.metrics import TurnMetrics  # noqa: E402

from .render import Table  # noqa: E402
from .tables import NO_TURN, NOT_EVALUATED, Unjudged, fmt_rate, fmt_speedup  # noqa: E402

NOT_RUN = "not run"
"""Cell text for a (model, arch, problem) the selected runs do not have."""
FAMILIES = ("d64", "d96", "GQA")
"""Generalization families, in the figure's order."""
_FAMILY_PATTERNS = (("GQA", re.compile(r"^gqa_")), ("d64", re.compile(r"_d64(_|$)")), ("d96", re.compile(r"_d96(_|$)")))


def family(definition: str) -> str | None:
    """The generalization family of a problem name, None for a primary (d128 attention, GEMM) problem."""
    return next((name for name, pattern in _FAMILY_PATTERNS if pattern.search(definition)), None)


def base_problem(definition: str) -> str | None:
    """The d128 problem an attention variant generalizes from (None for GQA and primary problems)."""
    fam = family(definition)
    return re.sub(r"_d(64|96)(_|$)", r"_d128\2", definition) if fam in ("d64", "d96") else None


def has_generalization(metrics: Sequence[TurnMetrics]) -> bool:
    return any(family(m.definition) for m in metrics)


def _ordered(defs: set[str]) -> list[str]:
    return sorted((d for d in defs if family(d)), key=lambda d: (FAMILIES.index(family(d)), d))


def _cells(metrics: Sequence[TurnMetrics], k: int) -> dict[tuple[str, str, str], TurnMetrics]:
    return {(m.model, m.arch, m.definition): m for m in metrics if m.k == k and m.prompt_variant is None}


def generalization_table(metrics: Sequence[TurnMetrics], k: int = 8, unjudged: Unjudged = frozenset()) -> Table:
    """Rows: generalization problems (and their d128 base where present); columns: one per (model, arch)."""
    cells = _cells(metrics, k)
    series = sorted({(mo, a) for (mo, a, _) in cells})
    defs = {d for (_, _, d) in cells}
    rows = []
    for d in _ordered(defs):
        base = base_problem(d)
        row = [d, family(d) or "", base if base in defs else "none"]
        for model, arch in series:
            row.append(_cell(cells, (model, arch, d), unjudged)
                       + (f" (d128: {_cell(cells, (model, arch, base), unjudged)})" if base in defs else ""))
        rows.append(row)
    return Table(title=f"Figure 6 style: generalization problems, target-correct turn rate % · best target speedup "
                       f"(k = {k})", header=["problem", "family", "base", *[f"{mo} ({a})" for mo, a in series]],
                 rows=rows, key="figure6")


def _cell(cells: dict, key: tuple[str, str, str], unjudged: Unjudged) -> str:
    m = cells.get(key)
    if m is None:
        return NOT_RUN
    if key in unjudged:
        return NOT_EVALUATED
    return f"{fmt_rate(m.target_turn_correct_rate)} · {fmt_speedup(m.target_best_speedup)}"


def plot_generalization(metrics: Sequence[TurnMetrics], path: Path, k: int = 8, unjudged: Unjudged = frozenset()
                        ) -> Path:
    """Two panels over the generalization problems: target-correct turn rate and best target speedup at k, one
    bar per (model, arch); groups without a judged turn read "n/e", a speedup with no target-correct turn "n/a", a dot marks the d128
    base problem."""
    cells = _cells(metrics, k)
    defs = _ordered({d for (_, _, d) in cells})
    series = sorted({(mo, a) for (mo, a, d) in cells if d in defs})
    fig, (ax_rate, ax_speed) = plt.subplots(2, 1, figsize=(max(7.0, 0.9 * len(defs) + 3), 7.2), sharex=True)
    width = 0.8 / max(len(series), 1)
    colors = plt.get_cmap("tab10")
    for i, (model, arch) in enumerate(series):
        xs = [j + (i - (len(series) - 1) / 2) * width for j in range(len(defs))]
        rate, speed, hatch = [], [], []
        for j, d in enumerate(defs):
            m = cells.get((model, arch, d))
            skipped = m is None or (model, arch, d) in unjudged
            rate.append(0.0 if skipped else 100 * m.target_turn_correct_rate)
            speed.append(0.0 if skipped or m.target_best_speedup is None else m.target_best_speedup)
            hatch.append(skipped)
            if not skipped and m.target_best_speedup is None:  # judged, but no target-correct turn to take it from
                ax_speed.annotate(NO_TURN, (xs[j], 0), xytext=(0, 3), textcoords="offset points", ha="center",
                                  fontsize=8)
        for ax, values in ((ax_rate, rate), (ax_speed, speed)):
            bars = ax.bar(xs, values, width, color=colors(i % 10), label=f"{model} ({arch})")
            for bar, skipped in zip(bars, hatch, strict=True):
                if skipped:
                    bar.set_hatch("//")
                    ax.annotate(NOT_EVALUATED, (bar.get_x() + bar.get_width() / 2, 0), xytext=(0, 3),
                                textcoords="offset points", ha="center", fontsize=8)
        for j, d in enumerate(defs):
            base = cells.get((model, arch, base_problem(d) or ""))
            if base is not None and base.target_best_speedup is not None:
                ax_speed.plot([xs[j]], [base.target_best_speedup], "k.", ms=6,
                              label="d128 base" if i == 0 and j == 0 else None)
    ax_rate.set_ylabel(f"target-correct turns @{k}, %")
    ax_rate.set_ylim(0, 100)
    ax_speed.set_ylabel(f"best target speedup @{k} (×)")
    ax_speed.axhline(1.0, color="0.4", lw=0.8, ls="--")
    ax_speed.set_xticks(range(len(defs)), defs, rotation=35, ha="right", fontsize=9)
    for j in range(1, len(defs)):
        if family(defs[j]) != family(defs[j - 1]):
            for ax in (ax_rate, ax_speed):
                ax.axvline(j - 0.5, color="0.75", lw=0.8)
    ax_rate.legend(fontsize=8, loc="upper right")
    if any(line.get_label() == "d128 base" for line in ax_speed.get_lines()):
        ax_speed.legend(handles=[line for line in ax_speed.get_lines() if line.get_label() == "d128 base"],
                        fontsize=8, loc="upper right")
    ax_rate.set_title("Generalization problems (d64, d96, GQA)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
