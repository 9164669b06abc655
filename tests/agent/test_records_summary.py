"""Turn records, per-step metrics and the headline table."""

from __future__ import annotations

import hashlib

from ptxcore.agent import (
    LLMReply,
    TurnOutcome,
    headline_markdown,
    headline_rows,
    parse_campaign,
    plan_campaign,
)
from ptxcore.agent.extraction import extract_kernel
from ptxcore.agent.records import step_metrics, turn_record
from ptxcore.agent.types import TurnEvaluation
from ptxcore.schema import EvaluationStatus, LLMUsage, TargetInstruction, TrajectoryRecord

from .fakes import compiled, failed, passed

PLAN = plan_campaign(parse_campaign(
    "name: t\nmodels: [{model: replay/scripted}]\nproblems: [gemm_n7168_k5120]\nprompt_variants: [hopper-pack]\n"
    "trajectories: 1\nturns: 3\n"))[0]


def outcome(turn: int, text: str, ev: TurnEvaluation) -> TurnOutcome:
    return TurnOutcome(turn=turn, reply=LLMReply(text=text, usage=LLMUsage(prompt_tokens=10, cost_usd=0.5)),
                       extraction=extract_kernel(text), evaluation=ev, feedback=f"fb {turn}")


def test_turn_record_carries_key_kernel_hash_and_verdict():
    rec = turn_record(PLAN, outcome(1, "```cpp\nint a;\n```", passed(1.4)), "f" * 64)
    assert rec.key == ("t", PLAN.trajectory_id, 1) and rec.kernel_sha256 == hashlib.sha256(b"int a;\n").hexdigest()
    assert rec.status is EvaluationStatus.PASSED and rec.speedup == 1.4 and rec.gpu == "Fake"
    assert rec.feedback == "fb 1" and rec.prompt_sha256 == "f" * 64 and rec.model == "replay/scripted"
    none = turn_record(PLAN, outcome(0, "no code", TurnEvaluation(status=EvaluationStatus.EXTRACTION_ERROR)), "")
    assert none.kernel_sha256 is None and none.kernel_text is None


def test_step_metrics_leave_correctness_unknown_when_not_evaluated():
    judged = step_metrics(turn_record(PLAN, outcome(2, "```cpp\nint a;\n```", passed(1.4)), ""))
    assert judged["correct"] == 1.0 and judged["target_executed"] == 1.0 and judged["speedup"] == 1.4
    assert judged["turn"] == 2.0 and judged["cost_usd"] == 0.5 and judged["gpu_judged"] == 1.0
    ne = TurnEvaluation(status=EvaluationStatus.NOT_EVALUATED, compile=compiled())
    m = step_metrics(turn_record(PLAN, outcome(0, "```cpp\nint a;\n```", ne), ""))
    assert "correct" not in m and "target_executed" not in m and m["compiled"] == 1.0 and m["gpu_judged"] == 0.0
    ce = step_metrics(turn_record(PLAN, outcome(0, "```cpp\nint a;\n```", TurnEvaluation(
        status=EvaluationStatus.COMPILE_ERROR)), ""))
    assert ce["correct"] == 0.0 and ce["compiled"] == 0.0


def test_headline_rows_count_turns_and_trajectories():
    recs = [turn_record(PLAN, outcome(0, "no code", TurnEvaluation(status=EvaluationStatus.EXTRACTION_ERROR)), ""),
            turn_record(PLAN, outcome(1, "```cpp\nint a;\n```", failed()), ""),
            turn_record(PLAN, outcome(2, "```cpp\nint b;\n```", passed(1.3)), "")]
    ne = TurnEvaluation(status=EvaluationStatus.NOT_EVALUATED, compile=compiled(),
                        target_instruction=TargetInstruction.UNKNOWN)
    other = PLAN.model_copy(update={"trajectory_id": "other"})
    recs.append(turn_record(other, outcome(0, "```cpp\nint c;\n```", ne), ""))
    traj = TrajectoryRecord(campaign_id="t", trajectory_id=PLAN.trajectory_id, model="replay/scripted", arch="hopper",
                            prompt_variant="hopper-pack", problem="gemm_n7168_k5120", stop_reason="target_reached")
    (row,) = headline_rows(recs, [traj])
    assert (row.trajectories, row.turns, row.extraction_errors, row.compiled) == (2, 4, 1, 3)
    assert (row.gpu_judged, row.not_evaluated, row.correct, row.target_correct) == (2, 1, 1, 1)
    assert (row.trajectories_correct, row.best_speedup, row.stop_reasons) == (1, 1.3, {"target_reached": 1})
    md = headline_markdown([row])
    assert "| replay/scripted | hopper | 2 | 4 | 3/4 (75%) | 3/4 (75%) | 2/3 (67%) | 1/2 (50%) |" in md
    assert "1 compiled turns were NOT_EVALUATED" in md
