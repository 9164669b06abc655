"""Isolation: an out-of-bounds writer, then a correct kernel on the same Judge and the same workload state."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ptxcore.arch import get_architecture
from ptxcore.gpu import JudgeConfig
from ptxcore.gpu.pipeline.judge import GpuJudge
from ptxcore.problems import get_problem
from ptxcore.schema import EvaluationStatus

pytestmark = pytest.mark.gpu
CONTROLS = Path(__file__).resolve().parents[1] / "fixtures" / "controls"


def test_oob_writer_then_correct_kernel(tmp_path):
    root = os.environ.get("PTXBENCH_TEST_CACHE")
    judge = GpuJudge(JudgeConfig(cache_dir=Path(root) if root else tmp_path, trials=3, warmup=1, iters=2))
    gemm, hopper = get_problem("gemm_n7168_k5120"), get_architecture("hopper")
    state = judge.workload_state(gemm, None)
    before = dict(state.checksums)
    bad = judge.judge((CONTROLS / "06_gemm_oob_write.cu").read_text(), gemm, hopper)
    assert bad.status is EvaluationStatus.RUNTIME_ERROR, bad.reason
    good = judge.judge((CONTROLS / "04_gemm_dummy_gmma.cu").read_text(), gemm, hopper)
    assert good.status is EvaluationStatus.PASSED, good.reason
    assert judge.workload_state(gemm, None) is state and state.verify_integrity() == []
    assert state.checksums == before
