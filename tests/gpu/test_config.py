"""JudgeConfig carries the protocol defaults of docs/architecture.md; tolerances come from the problem."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from ptxcore.gpu import JudgeConfig
from ptxcore.gpu.pipeline.judge import GpuJudge
from ptxcore.problems import get_problem


def test_protocol_defaults():
    c = JudgeConfig()
    assert (c.trials, c.warmup, c.iters, c.sanitizer_max_runs) == (3, 10, 50, 2)
    assert c.sanitizer and c.ncu and c.permute_inputs
    with pytest.raises(ValidationError):
        JudgeConfig(trials=0)
    with pytest.raises(ValidationError):
        JudgeConfig(bogus=1)


def test_tolerance_from_problem_unless_overridden(tmp_path):
    p = get_problem("gemm_n7168_k5120")
    t = GpuJudge(JudgeConfig(cache_dir=tmp_path)).tolerance(p)
    assert (t.atol, t.rtol, t.matched_ratio) == (0.01, 0.01, 1.0)
    t = GpuJudge(JudgeConfig(cache_dir=tmp_path, atol=0.1, matched_ratio=0.99)).tolerance(p)
    assert (t.atol, t.rtol, t.matched_ratio) == (0.1, 0.01, 0.99)


def test_import_is_light():
    import subprocess
    import sys

    code = "import sys, ptxcore.gpu; print(any(m in sys.modules for m in ('torch', 'cupy', 'cupti', 'tvm_ffi')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.stdout.strip() == "False", out.stderr
