"""tools/solutions_table.py renders what the envelopes say, marks what is missing, and edits only its section.

The envelopes here are hand-written test inputs in the shape of `ptxbench eval --json`, not results.
"""

from __future__ import annotations

import json

import pytest

from ptxcore.schema import (
    EvaluationStatus,
    JudgeResult,
    StaticTarget,
    TargetInstruction,
    TargetInstructionEvidence,
)
from research.kernel_models.kernel_source import SOLUTIONS
from tests.scripts import load_script

MT = load_script(SOLUTIONS.parent / "tools" / "solutions_table.py", "solutions_table")


def envelope(status: EvaluationStatus, latency=None, reference=None, target=TargetInstruction.ABSENT) -> dict:
    perf = None
    if latency is not None:
        perf = {
            "latency_ms": latency,
            "reference_latency_ms": reference,
            "speedup_factor": reference / latency,
        }
    result = JudgeResult(
        status=status,
        definition="gemm_n7168_k5120",
        arch="hopper",
        target_instruction=TargetInstructionEvidence(
            status=target, static=StaticTarget.PRESENT, family_thread_inst_executed={"gmma": 1024}
        ),
        performance=perf,
        correctness={"max_absolute_error": 0.0} if status in (EvaluationStatus.PASSED,
                                                               EvaluationStatus.INCORRECT_NUMERICAL) else None,
    )
    return result.model_dump(mode="json")


@pytest.fixture
def out_dir(tmp_path):
    (tmp_path / "gemm_n7168_k5120__wgmma_tma_ws.json").write_text(
        json.dumps(envelope(EvaluationStatus.PASSED, 1.0, 0.82, TargetInstruction.EXECUTED))
    )
    (tmp_path / "replay__gemm_n7168_k5120__turn1_RUNTIME_ERROR.json").write_text(
        json.dumps(envelope(EvaluationStatus.RUNTIME_ERROR))
    )
    (tmp_path / "replay__gemm_n7168_k5120__turn2_INCORRECT_NUMERICAL.json").write_text(
        json.dumps(envelope(EvaluationStatus.PASSED, 2.0, 0.82))
    )
    return tmp_path


def test_rows_follow_the_envelopes(out_dir):
    rows = {(row[0], row[1]): row for row in MT.library_rows(out_dir)}
    wg = rows[("gemm_n7168_k5120", "`wgmma_tma_ws.cu`")]
    assert wg[2] == "PASSED"
    assert wg[3:6] == ["1.0000", "0.8200", "0.820"]
    assert wg[6].startswith("executed (static present; gmma 1,024")
    assert rows[("gemm_n7168_k5120", "`cuda_core.cu`")][2] == "no result"
    assert len(rows) == len(list(SOLUTIONS.glob("*/*.cu")))


def test_replay_rows_compare_expected_and_judged(out_dir):
    rows = MT.replay_rows(out_dir)
    assert rows == [
        ["gemm_n7168_k5120", "1", "RUNTIME_ERROR", "RUNTIME_ERROR", "yes"],
        ["gemm_n7168_k5120", "2", "INCORRECT_NUMERICAL", "PASSED", "**no**"],
    ]


def test_readme_section_is_replaced_in_place(out_dir, tmp_path):
    readme = tmp_path / "README.md"
    readme.write_text(f"intro\n{MT.BEGIN}\nold\n{MT.END}\noutro\n")
    assert MT.main([str(out_dir), "--readme", str(readme)]) == 0
    text = readme.read_text()
    assert text.startswith("intro\n") and text.endswith("outro\n") and "old" not in text
    assert "| gemm_n7168_k5120 | `wgmma_tma_ws.cu` | PASSED |" in text


def test_a_cut_off_or_broken_envelope_is_named_never_a_traceback(out_dir):
    """Seen on the H200: the stage's time limit cut an eval off and left an empty envelope; the table stopped
    with a JSONDecodeError. Each kind of unreadable file is a row saying so, and the rest still renders."""
    (out_dir / "gemm_n7168_k5120__cuda_core.json").write_text("")
    (out_dir / "mha_bwd_d64__fa2_mma.json").write_text("{not json")
    (out_dir / "mha_bwd_d64__wgmma_tma_ws.json").write_text("[1, 2]")
    rows = {(row[0], row[1]): row for row in MT.library_rows(out_dir)}
    assert rows[("gemm_n7168_k5120", "`cuda_core.cu`")][2] == "no envelope (empty file: the eval was cut off)"
    assert rows[("mha_bwd_d64", "`fa2_mma.cu`")][2] == "no envelope (not JSON)"
    assert rows[("mha_bwd_d64", "`wgmma_tma_ws.cu`")][2] == "no envelope (not a verdict)"
    assert rows[("gemm_n7168_k5120", "`wgmma_tma_ws.cu`")][2] == "PASSED"
    problems = {row[0]: row for row in MT.problem_rows(out_dir)}
    assert problems["gemm_n7168_k5120"][3] == "`wgmma_tma_ws.cu`" and problems["mha_bwd_d64"][3] == "no result"
    assert MT.main([str(out_dir)]) == 0


def test_the_work_share_column_follows_the_evidence(out_dir):
    env = envelope(EvaluationStatus.PASSED, 1.0, 0.82, TargetInstruction.EXECUTED)
    env["target_instruction"]["work"] = {"flops_share": 1.4001, "carries": "carries"}
    (out_dir / "mha_bwd_d64__wgmma_tma_ws.json").write_text(json.dumps(env))
    rows = {(row[0], row[1]): row for row in MT.library_rows(out_dir)}
    assert rows[("mha_bwd_d64", "`wgmma_tma_ws.cu`")][7] == "1.40 (carries)"
    assert rows[("gemm_n7168_k5120", "`wgmma_tma_ws.cu`")][7] == "–"  # no work record in that envelope


def test_bad_out_dir_is_one_line_error(tmp_path, capsys):
    assert MT.main([str(tmp_path / "missing")]) == 2
    assert "is not a directory" in capsys.readouterr().err


def test_one_row_per_problem_with_the_fastest_passing_kernel(out_dir):
    (out_dir / "gemm_n7168_k5120__cuda_core.json").write_text(
        json.dumps(envelope(EvaluationStatus.PASSED, 20.0, 0.82)))
    rows = {row[0]: row for row in MT.problem_rows(out_dir)}
    gemm = rows["gemm_n7168_k5120"]
    assert gemm[1] == "cublas (version not recorded)" and gemm[2] == "0.8200"
    assert gemm[3:] == ["`wgmma_tma_ws.cu`", "PASSED", "0.820", "executed"]
    assert rows["mha_bwd_d64"][3] == "no result"  # no envelope: said, never filled in
    assert len(rows) == len({k.parent.name for k in SOLUTIONS.glob("*/*.cu")})
