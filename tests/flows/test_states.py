"""Prefect states of trajectories and campaigns say when verdicts were reused from recorded judgements."""

from __future__ import annotations

from ptxcore.agent import CampaignSummary
from ptxcore.schema import (
    CompileResult,
    CompileStatus,
    EvaluationStatus,
    RecordedVerdict,
    StopReason,
    TargetInstruction,
    TrajectoryRecord,
    TurnRecord,
)

from .fakes import H200_RECORDING, reused_pass

REC = H200_RECORDING


def _turn(turn: int, recorded: RecordedVerdict | None) -> TurnRecord:
    built = CompileResult(status=CompileStatus.COMPILED, source_sha256="a" * 64, arch="hopper")
    return TurnRecord(campaign_id="c", trajectory_id="t", turn=turn, model="replay/demo", arch="hopper", gpu=None,
                      prompt_variant="v", problem="gemm_n7168_k5120", status=EvaluationStatus.PASSED, speedup=0.9,
                      judge=reused_pass("gemm_n7168_k5120", recorded, 0.9), compile=built,
                      target_instruction=TargetInstruction.EXECUTED)


def test_trajectory_and_campaign_states_name_recorded_verdicts():
    from flows.artifacts import campaign_state, trajectory_state, turn_rows

    final = TrajectoryRecord(campaign_id="c", trajectory_id="t", model="replay/demo", arch="hopper",
                             prompt_variant="v", problem="gemm_n7168_k5120", num_turns=2,
                             stop_reason=StopReason.MAX_TURNS, best_speedup=0.9)
    turns = [_turn(0, REC), _turn(1, REC)]
    state = trajectory_state(final, turns)
    assert state.name == "PASSED (recorded)"
    assert state.message.endswith("; 2 verdicts recorded on NVIDIA H200, driver 580.159.04, 2026-12-01")
    assert [r["status"] for r in turn_rows(turns)] == ["PASSED (recorded)", "PASSED (recorded)"]
    measured = trajectory_state(final, [_turn(0, None)])
    assert measured.name == "PASSED" and "recorded" not in measured.message
    summary = CampaignSummary(campaign_id="c", warehouse="w", mlflow_tracking_uri="u", mlflow_experiment="e",
                              turns_recorded=2)
    assert "2 verdicts recorded on NVIDIA H200" in campaign_state(summary, turns).message


def test_the_ui_headline_is_on_its_side():
    """Prefect's artifact view showed 8 of the headline's 11 columns at 1400 px: the UI layout has a row per measure
    and a column per model and architecture (browser check: tests/browser, --run-browser)."""
    from ptxcore.agent import headline_rows
    from ptxcore.agent.summary import HEADER, headline_columns, headline_markdown

    rows = headline_rows([_turn(0, REC), _turn(1, None)])
    table = headline_columns(rows)
    assert [r["measure"] for r in table] == HEADER[2:]
    assert list(table[0]) == ["measure", "replay/demo · hopper"]
    by = {r["measure"]: r["replay/demo · hopper"] for r in table}
    assert (by["GPU-judged"], by["correct turns"], by["best speedup"]) == (
        "2/2 (1 recorded)", "2/2 (1 recorded)", "0.90x (1 recorded)")
    md = headline_markdown(rows, on_its_side=True)
    assert md.splitlines()[0] == "| measure | replay/demo · hopper |" and "| correct turns | 2/2 (1 recorded) |" in md
