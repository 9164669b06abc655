"""Figures: what a reader must be able to read off them (ticks, label sizes, colours, the log axis' zero)."""

from __future__ import annotations

import pytest

from ptxcore.metrics import fast_p_bands, fast_p_curves
from ptxcore.metrics.turns import TurnOutcome
from ptxcore.report import plots
from ptxcore.schema import EvaluationStatus, TargetInstruction

S = EvaluationStatus


def outcome(arch: str, trajectory: str, turn: int, status: EvaluationStatus, reasoning: int = 100,
            speedup: float | None = None) -> TurnOutcome:
    return TurnOutcome(run="r", model="m", arch=arch, definition="gemm", prompt_variant="v", trajectory_id=trajectory,
                       turn=turn, status=status, target_instruction=TargetInstruction.EXECUTED,
                       speedup=speedup if speedup is not None else (1.1 if status is S.PASSED else None),
                       reasoning_tokens=reasoning, max_turns=3)


OUTCOMES = [
    outcome("hopper", "t0", 0, S.COMPILE_ERROR, reasoning=0), outcome("hopper", "t0", 1, S.PASSED),
    outcome("hopper", "t0", 2, S.PASSED, reasoning=0, speedup=0.9),
    outcome("blackwell", "t1", 0, S.INCORRECT_NUMERICAL), outcome("blackwell", "t1", 1, S.PASSED, speedup=0.5),
]


@pytest.fixture
def figures(monkeypatch):
    """The figures a plot function drew, kept open for inspection (plots close them after saving)."""
    kept = []
    close = plots.plt.close
    monkeypatch.setattr(plots.plt, "close", kept.append)
    yield kept
    for fig in kept:
        close(fig)


def test_status_by_turn_has_a_tick_on_every_turn_and_only_integers(figures, tmp_path):
    plots.plot_status_by_turn(OUTCOMES, tmp_path / "s.png")
    for ax in [a for a in figures[0].axes if a.get_visible()]:
        assert [float(t) for t in ax.get_xticks()] in ([0.0, 1.0, 2.0], [0.0, 1.0])


def test_transition_heat_map_labels_are_at_least_9_pt(figures, tmp_path):
    plots.plot_transitions(OUTCOMES, tmp_path / "t.png")
    axes = [a for a in figures[0].axes if a.get_visible()]
    sizes = [t.get_fontsize() for ax in axes for t in [*ax.get_xticklabels(), *ax.get_yticklabels(), *ax.texts]]
    assert sizes and min(sizes) >= 9


def test_fast_p_gives_each_architecture_its_own_colour(figures, tmp_path):
    bands = fast_p_bands(fast_p_curves(OUTCOMES))
    plots.plot_fast_p(bands, tmp_path / "f.png", inst=False)
    (ax,) = [a for a in figures[0].axes if a.get_visible()]
    colours = {line.get_label(): line.get_color() for line in ax.get_lines() if not line.get_label().startswith("_")}
    line_colours = [tuple(line.get_color()) for line in ax.get_lines() if line.get_linestyle() != ":"]
    assert len(line_colours) == 2 and line_colours[0] != line_colours[1], colours


def test_zero_reasoning_turns_get_their_own_tick_and_a_count(figures, tmp_path):
    plots.plot_reasoning_vs_speedup(OUTCOMES, tmp_path / "r.png")
    by_title = {ax.get_title(): ax for ax in figures[0].axes if ax.get_visible()}
    hopper = by_title["hopper"]
    assert hopper.get_xticklabels()[0].get_text() == "0" and hopper.get_xticks()[0] == plots.ZERO_X
    assert '2 turns with 0 reasoning tokens at "0"' in hopper.get_xlabel()
    assert "0 turns with 0 reasoning tokens" in by_title["blackwell"].get_xlabel()
    xs = sorted(x for coll in hopper.collections for x, _ in coll.get_offsets())
    assert xs[0] == plots.ZERO_X and all(x == plots.ZERO_X or x >= 1 for x in xs)
