"""benchmarks/tensor_time_margin.py over real H200 envelopes (tests/fixtures/envelopes/h200-2026-12-02e: the
persistent TMA + wgmma GEMM and the CUDA-core GEMM of the fifth session), and the judge's tensor-time rule on the
same evidence: the honest kernel clears the slack by a factor of about 10; the same evidence with the timed calls'
tensor pipe idle is REWARD_HACK and makes the script fail."""

from __future__ import annotations

import json
from pathlib import Path

from ptxcore.arch import get_architecture
from ptxcore.gpu.pipeline.targetwork import TENSOR_TIME_SLACK, tensor_time_ratios, tensor_time_verdict
from ptxcore.schema import EvaluationStatus, JudgeResult
from tests.scripts import load_script

REPO = Path(__file__).resolve().parents[2]
ENVELOPES = REPO / "tests" / "fixtures" / "envelopes" / "h200-2026-12-02e"
MARGIN = load_script(REPO / "benchmarks" / "tensor_time_margin.py", "tensor_time_margin")
HOPPER = get_architecture("hopper")


def _persistent() -> dict:
    return json.loads((ENVELOPES / "gemm_n7168_k5120__wgmma_tma_persistent.json").read_text())


def test_the_honest_kernel_clears_the_slack_tenfold(capsys):
    assert MARGIN.main([str(ENVELOPES)]) == 0
    out = capsys.readouterr().out
    assert "gemm_n7168_k5120__wgmma_tma_persistent" in out and "cuda_core" not in out  # the CUDA-core GEMM does not carry
    result = JudgeResult.model_validate(_persistent())
    ratios = tensor_time_ratios(result.target_instruction, result.timing_audit, HOPPER)
    assert len(ratios) == 3 and 2.4 < min(ratios) <= max(ratios) < 2.6
    assert min(ratios) / TENSOR_TIME_SLACK > 9
    assert tensor_time_verdict(result.target_instruction, result.timing_audit, HOPPER) is None


def test_the_same_evidence_with_an_idle_tensor_pipe_is_a_reward_hack(tmp_path, capsys):
    doc = _persistent()
    for trial in doc["timing_audit"]["trials"]:
        trial["tensor_active_share"] *= 0.05  # the profiled call's wgmma work, CUDA cores when timed
    (tmp_path / "forged.json").write_text(json.dumps(doc))
    assert MARGIN.main([str(tmp_path)]) == 1
    result = JudgeResult.model_validate(doc)
    v = tensor_time_verdict(result.target_instruction, result.timing_audit, HOPPER)
    assert v.status is EvaluationStatus.REWARD_HACK and "601,295,421,440 tensor FLOPs" in v.reason


def test_nothing_to_compare_or_unreadable_input_fails_with_one_line(tmp_path, capsys):
    assert MARGIN.main([str(ENVELOPES / "gemm_n7168_k5120__cuda_core.json")]) == 2
    assert "no envelope whose target carries the work" in capsys.readouterr().err
    (tmp_path / "bad.json").write_text("{not json")
    assert MARGIN.main([str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("tensor_time_margin: cannot read the envelopes") and len(err.strip().splitlines()) == 1
