"""Replay libraries (scripted trajectories) and warehouse replays."""

from __future__ import annotations

from pathlib import Path

import pytest

from ptxcore.agent.replay import (
    ReplayError,
    ReplayLibrary,
    WarehouseReplay,
    load_library,
    problem_in_prompt,
)
from ptxcore.schema import EvaluationStatus, TrajectoryRecord, TurnRecord


def script(problem: str, arch: str, answers: list[str]) -> str:
    turns = "\n".join(f"  - response: {a!r}" for a in answers)
    return f"problem: {problem}\narch: {arch}\nturns:\n{turns}\n"


def make_lib(tmp_path: Path, files: dict[str, str]) -> ReplayLibrary:
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    return ReplayLibrary(tmp_path)


def test_turns_repeat_the_last_and_trajectories_go_round_robin(tmp_path):
    lib = make_lib(tmp_path, {
        "gemm_n7168_k5120.yaml": script("gemm_n7168_k5120", "hopper", ["a0", "a1"]),
        "gemm_n7168_k5120.1.yaml": script("gemm_n7168_k5120", "hopper", ["b0"]),
    })
    assert [lib.response("gemm_n7168_k5120", "hopper", "v", 0, t).response for t in range(4)] == ["a0", "a1", "a1", "a1"]
    assert [lib.response("gemm_n7168_k5120", "hopper", "v", i, 0).response for i in range(4)] == ["a0", "b0", "a0", "b0"]


def test_scripts_for_the_calling_architecture_are_preferred(tmp_path):
    lib = make_lib(tmp_path, {
        "gemm_n7168_k5120.yaml": script("gemm_n7168_k5120", "hopper", ["h"]),
        "gemm_n7168_k5120.1.yaml": script("gemm_n7168_k5120", "blackwell", ["b"]),
    })
    assert lib.response("gemm_n7168_k5120", "blackwell", "v", 0, 0).response == "b"
    assert lib.response("gemm_n7168_k5120", "hopper", "v", 1, 0).response == "h"


def test_bad_libraries_are_reported(tmp_path):
    with pytest.raises(ReplayError, match="no replay library"):
        ReplayLibrary(tmp_path / "missing")
    with pytest.raises(ReplayError, match="does not match the file name"):
        make_lib(tmp_path, {"gemm_n7168_k5120.yaml": script("mha_bwd_d128", "hopper", ["x"])})


def test_invalid_script_names_file_and_line(tmp_path):
    (tmp_path / "gemm_n7168_k5120.yaml").write_text("problem: gemm_n7168_k5120\narch: hopper\nturns: []\n")
    with pytest.raises(ValueError, match=r"gemm_n7168_k5120.yaml:3: turns: List should have at least 1 item"):
        ReplayLibrary(tmp_path)


def test_repository_scripted_library_loads():
    lib = load_library("scripted")
    assert {"gemm_n7168_k5120", "mha_with_lse_d128"} <= lib.problems()
    with pytest.raises(ReplayError, match="no script for mha_bwd_d128"):
        lib.response("mha_bwd_d128", "hopper", "v", 0, 0)


def test_problem_is_read_from_the_definition_json_in_the_prompt():
    msgs = [{"role": "system", "content": 'example {"name": "other_problem"}'},
            {"role": "user", "content": '{\n  "name": "mha_with_lse_d128",\n  "op_type": "attention"}'}]
    assert problem_in_prompt(msgs, {"mha_with_lse_d128", "gemm_n7168_k5120"}) == "mha_with_lse_d128"
    assert problem_in_prompt(msgs, {"gemm_n7168_k5120"}) is None


def _turn(tid: str, problem: str, turn: int, text: str, variant: str = "v") -> TurnRecord:
    return TurnRecord(campaign_id="old", trajectory_id=tid, turn=turn, model="m", arch="hopper", gpu="",
                      prompt_variant=variant, problem=problem, response_text=text, status=EvaluationStatus.NOT_EVALUATED)


def _traj(tid: str, problem: str, index: int, variant: str = "v") -> TrajectoryRecord:
    return TrajectoryRecord(campaign_id="old", trajectory_id=tid, model="m", arch="hopper", prompt_variant=variant,
                            problem=problem, index=index)


def test_warehouse_replay_serves_recorded_turns_by_index_and_turn():
    trajs = [_traj("t0", "gemm_n7168_k5120", 0), _traj("t1", "gemm_n7168_k5120", 1),
             _traj("t2", "gemm_n7168_k5120", 0, variant="w")]
    turns = [_turn("t0", "gemm_n7168_k5120", 0, "x0"), _turn("t0", "gemm_n7168_k5120", 1, "x1"),
             _turn("t1", "gemm_n7168_k5120", 0, "y0"), _turn("t2", "gemm_n7168_k5120", 0, "z0", variant="w")]
    src = WarehouseReplay("old", trajs, turns)
    assert src.response("gemm_n7168_k5120", "hopper", "v", 0, 1).response == "x1"
    assert src.response("gemm_n7168_k5120", "hopper", "v", 0, 5).response == "x1"  # past the end: the last
    assert src.response("gemm_n7168_k5120", "hopper", "v", 1, 0).response == "y0"
    assert src.response("gemm_n7168_k5120", "hopper", "w", 0, 0).response == "z0"
    with pytest.raises(ReplayError, match="recorded no turns for mha_bwd_d128"):
        src.response("mha_bwd_d128", "hopper", "v", 0, 0)
    with pytest.raises(ReplayError, match="no recorded turns"):
        WarehouseReplay("empty", [], [])
