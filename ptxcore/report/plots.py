"""PNG figures of the report (matplotlib, Agg backend; headless).

- Figure 2 style: Fast_p^Inst (and Fast_p) curves per problem, the mean over prompt variants as a line
  and the min–max across variants shaded.
- Figures 7 / 9 style: turn-level error states — the status mix at every turn and the transition
  matrix between consecutive turns of a trajectory.
- Figure 15 style: reasoning length vs speedup of every turn.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.ticker import MaxNLocator  # noqa: E402

from ptxcore.metrics import FastPBand, TurnOutcome  # noqa: E402
from ptxcore.schema import EvaluationStatus as S  # noqa: E402

STATUS_ORDER = [S.PASSED, S.INCORRECT_NUMERICAL, S.INCORRECT_SHAPE, S.INCORRECT_DTYPE, S.COMPILE_ERROR,
                S.RUNTIME_ERROR, S.TIMEOUT, S.EXTRACTION_ERROR, S.REJECTED, S.REWARD_HACK, S.INFRA_ERROR,
                S.NOT_EVALUATED]
STATUS_COLORS = {
    S.PASSED: "#2ca02c", S.INCORRECT_NUMERICAL: "#d62728", S.INCORRECT_SHAPE: "#ff9896",
    S.INCORRECT_DTYPE: "#c49c94", S.COMPILE_ERROR: "#ff7f0e", S.RUNTIME_ERROR: "#1f77b4",
    S.TIMEOUT: "#9467bd", S.EXTRACTION_ERROR: "#7f7f7f", S.REJECTED: "#17becf", S.REWARD_HACK: "#000000",
    S.INFRA_ERROR: "#e377c2", S.NOT_EVALUATED: "#c7c7c7",
}
LABEL_PT = 9
"""Smallest font size of labels that must be read (heat-map ticks and counts)."""
ZERO_X = 0.3
"""Where turns with zero reasoning tokens sit on the log axis (left of 1, with their own tick "0")."""
SHORT = {S.PASSED: "pass", S.INCORRECT_NUMERICAL: "numeric", S.INCORRECT_SHAPE: "shape", S.INCORRECT_DTYPE: "dtype",
         S.COMPILE_ERROR: "compile", S.RUNTIME_ERROR: "runtime", S.TIMEOUT: "timeout", S.EXTRACTION_ERROR: "extract",
         S.REJECTED: "rejected", S.REWARD_HACK: "hack", S.INFRA_ERROR: "infra", S.NOT_EVALUATED: "n/a"}


def _grid(n: int, cols: int = 3, w: float = 4.6, h: float = 3.4):
    cols = max(1, min(cols, n))
    rows = math.ceil(n / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(w * cols, h * rows), squeeze=False)
    flat = [ax for row in axes for ax in row]
    for ax in flat[n:]:
        ax.set_visible(False)
    return fig, flat[:n]


def _save(fig, path: Path) -> Path:
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _label(model: str, arch: str) -> str:
    return f"{model} ({arch})"


def plot_fast_p(bands: Sequence[FastPBand], path: Path, inst: bool = True, p_max: float | None = None,
                unjudged: frozenset[tuple[str, str, str]] = frozenset(), work: bool = False) -> Path:
    """Fast_p^Inst (inst=True), Fast_p (inst=False) or Fast_p^Work (work=True: turns whose target path carried the
    work, issue 25) curves, one panel per problem, shading = min–max over variants.
    Series of (model, arch, problem) groups without any judged turn are left out and the panel says so."""
    field = "fast_p_work" if work else "fast_p_inst" if inst else "fast_p"
    label = "Fast$_p^{Work}$" if work else "Fast$_p^{Inst}$" if inst else "Fast$_p$"
    by_def: dict[str, dict[tuple[str, str], list[FastPBand]]] = defaultdict(lambda: defaultdict(list))
    for b in bands:
        series = by_def[b.definition]  # creates the panel even when every series is unjudged
        if (b.model, b.arch, b.definition) not in unjudged:
            series[(b.model, b.arch)].append(b)
    top = p_max or max(1.3, max((b.p for b in bands if getattr(b, f"{field}_max") > 0), default=1.0) + 0.1)
    fig, axes = _grid(max(1, len(by_def)))
    colors, styles = _series_colors([(b.model, b.arch) for b in bands]), _arch_styles([b.arch for b in bands])
    handles: dict[str, object] = {}
    for ax, (definition, series) in zip(axes, sorted(by_def.items()), strict=False):
        for (model, arch), pts in sorted(series.items()):
            pts = sorted((b for b in pts if b.p <= top), key=lambda b: b.p)
            ps = [b.p for b in pts]
            mean = [getattr(b, f"{field}_mean") for b in pts]
            lo = [getattr(b, f"{field}_min") for b in pts]
            hi = [getattr(b, f"{field}_max") for b in pts]
            color = colors[(model, arch)]
            (line,) = ax.plot(ps, mean, lw=1.6, drawstyle="steps-post", color=color, ls=styles[arch])
            ax.fill_between(ps, lo, hi, step="post", alpha=0.15, color=color, lw=0)
            handles.setdefault(_label(model, arch), line)
        if not series:
            ax.text(0.5, 0.5, "not evaluated\n(no judged turn)", ha="center", va="center", transform=ax.transAxes)
        ax.axvline(1.0, color="k", lw=0.6, ls=":")
        ax.set(title=definition, xlabel="speedup threshold p", ylabel=label, xlim=(0, top), ylim=(0, 1.02))
        ax.grid(alpha=0.3)
    if not by_def:
        axes[0].text(0.5, 0.5, "no turns", ha="center", transform=axes[0].transAxes)
    fig.suptitle(label + " over all turns (line: mean over prompt variants, "
                 "band: min–max across variants)", fontsize=10)
    return _save_with_legend(fig, handles)(path)


def _series_colors(series: Sequence[tuple[str, str]]) -> dict[tuple[str, str], object]:
    """One colour per (model, architecture) series, so two architectures of one model never share one."""
    return {key: plt.cm.tab10(i % 10) for i, key in enumerate(sorted(set(series)))}


def _arch_styles(archs: Sequence[str]) -> dict[str, str]:
    return {a: ("-", "--", ":", "-.")[i % 4] for i, a in enumerate(sorted(set(archs)))}


def _save_with_legend(fig, handles: dict[str, object]):
    def save(path: Path) -> Path:
        rows = math.ceil(len(handles) / 4) if handles else 0
        if handles:
            fig.legend(list(handles.values()), list(handles), loc="lower center", ncol=4, fontsize=8, frameon=False)
        fig.tight_layout(rect=(0, 0.035 * rows + 0.01 if rows else 0, 1, 0.96))
        fig.savefig(path, dpi=110)
        plt.close(fig)
        return path
    return save


def _by_cell(outcomes: Sequence[TurnOutcome]) -> dict[tuple[str, str], list[TurnOutcome]]:
    cells: dict[tuple[str, str], list[TurnOutcome]] = defaultdict(list)
    for o in outcomes:
        cells[(o.model, o.arch)].append(o)
    return dict(sorted(cells.items()))


def plot_status_by_turn(outcomes: Sequence[TurnOutcome], path: Path) -> Path:
    """Share of each status at every turn index, one panel per (model, arch)."""
    cells = _by_cell(outcomes)
    fig, axes = _grid(max(1, len(cells)), cols=4, w=4.0, h=3.0)
    present = [s for s in STATUS_ORDER if any(o.status is s for o in outcomes)]
    for ax, ((model, arch), turns) in zip(axes, cells.items(), strict=False):
        per_turn: dict[int, Counter] = defaultdict(Counter)
        for o in turns:
            per_turn[o.turn][o.status] += 1
        xs = sorted(per_turn)
        bottom = [0.0] * len(xs)
        for s in present:
            share = [per_turn[x][s] / sum(per_turn[x].values()) for x in xs]
            ax.bar(xs, share, bottom=bottom, color=STATUS_COLORS[s], width=0.85, label=SHORT[s])
            bottom = [b + v for b, v in zip(bottom, share, strict=True)]
        ax.set(title=_label(model, arch), xlabel="turn", ylabel="share of turns", ylim=(0, 1))
        _integer_ticks(ax, xs)
        ax.title.set_fontsize(9)
    if present:
        fig.legend(*axes[0].get_legend_handles_labels(), loc="lower center", ncol=len(present), fontsize=7)
        fig.subplots_adjust(bottom=0.12)
    fig.suptitle("Turn status by turn index", fontsize=10)
    fig.tight_layout(rect=(0, 0.05, 1, 0.97))
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _integer_ticks(ax, turns: Sequence[int]) -> None:
    """Turn indices are integers: a tick on every turn (at most 16), else integer ticks only."""
    if turns and len(turns) <= 16:
        ax.set_xticks(list(turns))
    else:
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))


def transitions(outcomes: Sequence[TurnOutcome]) -> Counter:
    """Counts of (status at turn t, status at turn t+1) over consecutive turns of every trajectory."""
    seq: dict[tuple[str, str], dict[int, S]] = defaultdict(dict)
    for o in outcomes:
        seq[(o.run, o.trajectory_id)][o.turn] = o.status
    out: Counter = Counter()
    for turns in seq.values():
        for t, s in turns.items():
            if t + 1 in turns:
                out[(s, turns[t + 1])] += 1
    return out


def plot_transitions(outcomes: Sequence[TurnOutcome], path: Path) -> Path:
    """Row-normalised transition matrices (status at t -> t+1), one panel per (model, arch)."""
    cells = _by_cell(outcomes)
    fig, axes = _grid(max(1, len(cells)), cols=3, w=5.4, h=5.0)
    for ax, ((model, arch), turns) in zip(axes, cells.items(), strict=False):
        counts = transitions(turns)
        states = [s for s in STATUS_ORDER if any(s in pair for pair in counts)]
        grid = [[counts[(a, b)] for b in states] for a in states]
        shares = [[v / max(1, sum(row)) for v in row] for row in grid]
        ax.imshow(shares or [[0]], cmap="Blues", vmin=0, vmax=1)
        for i, row in enumerate(grid):
            for j, v in enumerate(row):
                if v:
                    ax.text(j, i, str(v), ha="center", va="center", fontsize=LABEL_PT,
                            color="white" if shares[i][j] > 0.6 else "black")
        names = [SHORT[s] for s in states]
        ax.set_xticks(range(len(states)), names, rotation=45, ha="right", fontsize=LABEL_PT)
        ax.set_yticks(range(len(states)), names, fontsize=LABEL_PT)
        ax.set_xlabel("status at turn t+1", fontsize=LABEL_PT + 1)
        ax.set_ylabel("status at turn t", fontsize=LABEL_PT + 1)
        ax.set_title(_label(model, arch), fontsize=LABEL_PT + 1)
    fig.suptitle("Status transitions t → t+1 (counts; colour = row share)", fontsize=11)
    return _save(fig, path)


def _reasoning_x(o: TurnOutcome) -> float:
    return float(o.reasoning_tokens) if o.reasoning_tokens > 0 else ZERO_X


def _mark_zero_reasoning(ax, turns: Sequence[TurnOutcome]) -> None:
    """A log axis has no 0: zero-reasoning turns sit at ZERO_X under a tick "0", fenced off by a dashed line,
    and the axis label says how many there are."""
    zeros = sum(o.reasoning_tokens <= 0 for o in turns)
    ax.set_xlim(left=ZERO_X / 1.8)
    ax.axvline(ZERO_X * 1.8, color="#888888", lw=0.8, ls="--")
    ticks = [t for t in ax.get_xticks() if 1 <= t <= ax.get_xlim()[1]]
    ax.set_xticks([ZERO_X, *ticks], ["0", *(f"$10^{{{round(math.log10(t))}}}$" for t in ticks)])
    ax.xaxis.set_minor_locator(plt.NullLocator())
    noun = "turn" if zeros == 1 else "turns"
    ax.set_xlabel(f"reasoning tokens (log scale); {zeros} {noun} with 0 reasoning tokens at \"0\"")


def plot_reasoning_vs_speedup(outcomes: Sequence[TurnOutcome], path: Path) -> Path:
    """Reasoning tokens (log x) vs speedup of correct turns; failed turns at 0; one panel per arch.
    Turns with zero reasoning tokens sit left of the log axis at a tick labelled 0, counted in the panel."""
    archs = sorted({o.arch for o in outcomes}) or ["none"]
    fig, axes = _grid(len(archs), cols=2, w=6.0, h=4.2)
    models = sorted({o.model for o in outcomes})
    colors = {m: plt.cm.tab10(i % 10) for i, m in enumerate(models)}
    for ax, arch in zip(axes, archs, strict=True):
        turns = [o for o in outcomes if o.arch == arch]
        failed = [o for o in turns if not o.correct]
        ax.scatter([_reasoning_x(o) for o in failed], [0.0] * len(failed), s=6, marker="|",
                   color="#bbbbbb", label="not correct (at 0)")
        for m in models:
            ok = [o for o in turns if o.model == m and o.correct and o.speedup is not None]
            if ok:
                ax.scatter([_reasoning_x(o) for o in ok], [o.speedup for o in ok], s=10, alpha=0.6,
                           color=colors[m], label=m)
        ax.set_xscale("log")
        ax.axhline(1.0, color="k", lw=0.6, ls=":")
        ax.set(title=arch, ylabel="speedup vs library")
        ax.grid(alpha=0.3)
        _mark_zero_reasoning(ax, turns)
        ax.legend(fontsize=7, loc="upper right")
    fig.suptitle("Reasoning length vs speedup", fontsize=10)
    return _save(fig, path)
