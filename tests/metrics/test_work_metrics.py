"""The strict metrics beside the paper's (issue 25): a correct turn counts for the target-work rate, the work best
speedup and Fast_p^Work only when its target path carried the work; every expected number is derived below."""

from __future__ import annotations

from ptxcore.metrics import TurnOutcome, fast_p_bands, fast_p_curves, turn_metrics, variant_spread
from ptxcore.schema import EvaluationStatus as S
from ptxcore.schema import TargetInstruction as T
from ptxcore.schema import TargetWork as W


def o(traj: str, turn: int, status: S, target: T, work: W, speedup: float | None, variant: str = "p0") -> TurnOutcome:
    return TurnOutcome(run="r", model="m", arch="hopper", definition="d", prompt_variant=variant, trajectory_id=traj,
                       turn=turn, status=status, target_instruction=target, speedup=speedup, reasoning_tokens=0,
                       max_turns=4, target_work=work)


# A: a real wgmma kernel (1.3x, carries); a dummy-instruction kernel (2.0x: executed for the paper, does not carry);
# a TMA-only kernel whose bytes are unknown (1.1x). B: an executed and carried 0.9x, then a wrong turn.
CASE = [o("A", 0, S.PASSED, T.EXECUTED, W.CARRIES, 1.3), o("A", 1, S.PASSED, T.EXECUTED, W.DOES_NOT_CARRY, 2.0),
        o("A", 2, S.PASSED, T.EXECUTED, W.UNKNOWN, 1.1), o("B", 0, S.PASSED, T.EXECUTED, W.CARRIES, 0.9, "p1"),
        o("B", 1, S.INCORRECT_NUMERICAL, T.UNKNOWN, W.UNKNOWN, None, "p1")]


def test_the_work_rate_counts_only_turns_that_carried_the_work():
    m = {x.k: x for x in turn_metrics(CASE)}
    # k = 4: 2 trajectories x 4 slots = 8; 4 correct turns all executed (paper: 4/8), 2 carried (strict: 2/8)
    assert (m[4].turn_correct_rate, m[4].target_turn_correct_rate, m[4].work_turn_correct_rate) == (0.5, 0.5, 0.25)
    # the dummy's 2.0x is the paper's best target speedup, not the work's
    assert (m[4].target_best_speedup, m[4].work_best_speedup) == (2.0, 1.3)
    assert m[4].work_evidence_turns == 3  # carries, does_not_carry, carries; the unknowns are not evidence
    # k = 1: turn 0 of A (carries, 1.3) and of B (carries, 0.9): 2 / 2
    assert m[1].work_turn_correct_rate == 1.0 and m[1].work_evidence_turns == 2


def test_fast_p_work():
    pts = {(p.prompt_variant, p.p): p for p in fast_p_curves(CASE)}
    # p0 (trajectory A, 1 x 4 slots): speedups 1.3 (carries), 2.0 (not), 1.1 (unknown); above p = 1.0
    assert (pts[("p0", 1.0)].fast_p, pts[("p0", 1.0)].fast_p_inst, pts[("p0", 1.0)].fast_p_work) == (0.75, 0.75, 0.25)
    assert pts[("p0", 1.5)].fast_p_inst == 0.25 and pts[("p0", 1.5)].fast_p_work == 0.0
    band = next(b for b in fast_p_bands(fast_p_curves(CASE)) if b.p == 0.5)
    # p0: 1 of 4 (1.3); p1: 1 of 4 (0.9) -> mean 0.25
    assert (band.fast_p_work_mean, band.fast_p_work_min, band.fast_p_work_max) == (0.25, 0.25, 0.25)


def test_the_work_spread_across_variants():
    (s4,) = [s for s in variant_spread(turn_metrics(CASE, by_variant=True)) if s.k == 4]
    # p0: 1 carried of 4 slots; p1: 1 of 4
    assert (s4.work_turn_correct_rate_min, s4.work_turn_correct_rate_max) == (0.25, 0.25)
