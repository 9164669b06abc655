"""Metric maths on a small hand-built case; every expected number is derived in the comments."""

from __future__ import annotations

import pytest

from ptxcore.metrics import (
    TurnOutcome,
    fast_p_bands,
    fast_p_curves,
    turn_metrics,
    variant_spread,
)
from ptxcore.schema import EvaluationStatus as S
from ptxcore.schema import TargetInstruction as T

P, CE, INF, NUM = S.PASSED, S.COMPILE_ERROR, S.INFRA_ERROR, S.INCORRECT_NUMERICAL
EX, NX, UNK = T.EXECUTED, T.NOT_EXECUTED, T.UNKNOWN


def o(traj: str, variant: str, turn: int, status: S, target: T = UNK, speedup: float | None = None,
      run: str = "r", budget: int = 4) -> TurnOutcome:
    return TurnOutcome(run=run, model="m", arch="hopper", definition="d", prompt_variant=variant,
                       trajectory_id=traj, turn=turn, status=status, target_instruction=target,
                       speedup=speedup, reasoning_tokens=100 * turn, max_turns=budget)


# Trajectory A (variant p0): compile error, then correct 0.5 (target executed), 0.9 (not executed),
# 1.3 (executed). Trajectory B (variant p1): correct 0.2 (unknown), then 1.25 executed -> stopped early,
# so B has no turns 2 and 3.
CASE = [
    o("A", "p0", 0, CE), o("A", "p0", 1, P, EX, 0.5), o("A", "p0", 2, P, NX, 0.9), o("A", "p0", 3, P, EX, 1.3),
    o("B", "p1", 0, P, UNK, 0.2), o("B", "p1", 1, P, EX, 1.25),
]


def by_k(metrics):
    return {m.k: m for m in metrics}


def test_turn_metrics_hand_case():
    m = by_k(turn_metrics(CASE, ks=(1, 2, 4)))
    # k=1: correct {B0} -> 1/(2*1); target none; best 0.2
    assert (m[1].turn_correct_rate, m[1].target_turn_correct_rate) == (0.5, 0.0)
    assert (m[1].best_speedup, m[1].target_best_speedup) == (0.2, None)
    # k=2: correct {A1, B0, B1} -> 3/4; target {A1, B1} -> 2/4; best 1.25
    assert (m[2].turn_correct_rate, m[2].target_turn_correct_rate) == (0.75, 0.5)
    assert (m[2].best_speedup, m[2].target_best_speedup) == (1.25, 1.25)
    # k=4: correct {A1, A2, A3, B0, B1} -> 5/8 (B's unplayed turns stay in the denominator); target {A1, A3, B1}
    assert (m[4].turn_correct_rate, m[4].target_turn_correct_rate) == (0.625, 0.375)
    assert (m[4].best_speedup, m[4].target_best_speedup) == (1.3, 1.3)
    assert all(x.n_trajectories == 2 and x.prompt_variant is None for x in m.values())


def test_non_passed_speedups_and_infra_turns_do_not_count():
    case = [o("A", "p0", 0, NUM, EX, 5.0), o("A", "p0", 1, INF), o("A", "p0", 2, P, EX, 0.4)]
    m = by_k(turn_metrics(case, ks=(2, 4)))
    # k=2: no correct turn (the 5.0 belongs to a wrong result, the infra turn is played but not correct)
    assert (m[2].turn_correct_rate, m[2].best_speedup) == (0.0, None)
    # k=4: one correct turn of 1*4 slots
    assert (m[4].turn_correct_rate, m[4].target_turn_correct_rate, m[4].best_speedup) == (0.25, 0.25, 0.4)


def test_groups_are_separate_and_sorted():
    case = CASE + [o("X", "p0", 0, P, EX, 2.0, run="a_run")]
    m = turn_metrics(case, ks=(1,))
    assert [(x.run, x.turn_correct_rate, x.best_speedup) for x in m] == [("a_run", 1.0, 2.0), ("r", 0.5, 0.2)]


def test_per_variant_and_spread():
    per = {(m.prompt_variant, m.k): m for m in turn_metrics(CASE, ks=(2,), by_variant=True)}
    # p0 = A alone: turns < 2 correct {A1} -> 1/2, target 1/2; p1 = B: {B0, B1} -> 2/2, target {B1} -> 1/2
    assert (per[("p0", 2)].turn_correct_rate, per[("p0", 2)].target_turn_correct_rate) == (0.5, 0.5)
    assert (per[("p1", 2)].turn_correct_rate, per[("p1", 2)].target_turn_correct_rate) == (1.0, 0.5)
    (s,) = variant_spread(per.values())
    assert (s.n_variants, s.turn_correct_rate_mean, s.turn_correct_rate_min, s.turn_correct_rate_max) == (2, 0.75, 0.5, 1.0)
    assert (s.target_turn_correct_rate_mean, s.target_turn_correct_rate_min) == (0.5, 0.5)
    with pytest.raises(ValueError, match="per-variant"):
        variant_spread(turn_metrics(CASE, ks=(2,)))


def test_fast_p_hand_case():
    pts = {(x.prompt_variant, x.p): x for x in fast_p_curves(CASE, ps=(0.0, 0.5, 1.0, 1.3))}
    # p0 (A, N=4 slots): correct speedups 0.5, 0.9, 1.3; executed ones 0.5, 1.3; strictly greater than p
    assert [(pts[("p0", p)].fast_p, pts[("p0", p)].fast_p_inst) for p in (0.0, 0.5, 1.0, 1.3)] == [
        (0.75, 0.5), (0.5, 0.25), (0.25, 0.25), (0.0, 0.0)]
    # p1 (B, 4 slots although it stopped after 2 turns): speedups 0.2, 1.25; executed 1.25
    assert [(pts[("p1", p)].fast_p, pts[("p1", p)].fast_p_inst) for p in (0.0, 0.5, 1.0, 1.3)] == [
        (0.5, 0.25), (0.25, 0.25), (0.25, 0.25), (0.0, 0.0)]
    bands = {b.p: b for b in fast_p_bands(pts.values())}
    b = bands[0.5]  # fast_p over variants 0.5 and 0.25; inst 0.25 and 0.25
    assert (b.n_variants, b.fast_p_mean, b.fast_p_min, b.fast_p_max) == (2, 0.375, 0.25, 0.5)
    assert (b.fast_p_inst_mean, b.fast_p_inst_min, b.fast_p_inst_max) == (0.25, 0.25, 0.25)


def test_fast_p_zero_equals_turn_rate_at_budget():
    rate = by_k(turn_metrics(CASE, ks=(4,)))[4].turn_correct_rate
    pts = fast_p_curves(CASE, ps=(0.0,))
    pooled = sum(x.fast_p * x.n_trajectories for x in pts) / sum(x.n_trajectories for x in pts)
    assert pooled == rate == 0.625


def test_turn_limit_must_be_positive():
    with pytest.raises(ValueError, match=">= 1"):
        turn_metrics(CASE, ks=(0,))


def test_json_keys_are_exact():
    (m,) = turn_metrics(CASE, ks=(1,))
    assert list(m.to_json()) == ["run", "model", "arch", "definition", "k", "n_trajectories", "turn_correct_rate",
                                 "target_turn_correct_rate", "best_speedup", "target_best_speedup", "turns_counted",
                                 "recorded_turns", "recorded_from"]


def test_a_turn_limit_beyond_the_budget_counts_the_whole_budget():
    """A 4-turn campaign has no 8th turn: its k = 8 is its k = 4 (5 correct of 2 x 4, not of 2 x 8), as a
    5-turn demo's k = 8 is its k = 5."""
    m = by_k(turn_metrics(CASE, ks=(4, 8)))
    assert (m[8].turn_correct_rate, m[8].target_turn_correct_rate, m[8].turns_counted) == (0.625, 0.375, 4)
    assert m[8].model_dump(exclude={"k"}) == m[4].model_dump(exclude={"k"})


def test_recorded_verdicts_are_counted_per_turn_limit():
    label = "NVIDIA H200, driver 580.159.04, 2026-12-01"
    case = [c.model_copy(update={"recorded_from": label}) if c.turn == 1 else c for c in CASE]
    m = by_k(turn_metrics(case, ks=(1, 2)))
    assert (m[1].recorded_turns, m[1].recorded_from) == (0, None)
    assert (m[2].recorded_turns, m[2].recorded_from) == (2, label)
