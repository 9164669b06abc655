"""Tool runs prepared while the candidate's correctness runs (JudgeConfig.prepare_tools, issue 27), on the GPU:
the same verdicts and executed-instruction counts as the judge without the preparation, and nothing prepared left
once a judgement ends, passed or failed."""

from __future__ import annotations

from pathlib import Path

import pytest

from ptxcore.arch import get_architecture
from ptxcore.gpu import JudgeConfig
from ptxcore.gpu.pipeline.judge import GpuJudge
from ptxcore.problems import get_problem
from ptxcore.schema import EvaluationStatus as S
from ptxcore.schema import TargetInstruction as T

pytestmark = pytest.mark.gpu

CONTROLS_DIR = Path(__file__).resolve().parents[1] / "fixtures" / "controls"
GEMM = "gemm_n7168_k5120"
CONFIG = dict(trials=3, warmup=1, iters=3, call_timeout_s=10.0, throttle_retries=0)


@pytest.fixture(scope="module")
def judges(tmp_path_factory):
    made = {on: GpuJudge(JudgeConfig(cache_dir=tmp_path_factory.mktemp(f"prepared-{on}"), prepare_tools=on, **CONFIG))
            for on in (False, True)}
    yield made
    for judge in made.values():
        judge.close()


@pytest.mark.parametrize("name, status, target", [
    ("02_gemm_tma.cu", S.PASSED, T.EXECUTED),
    ("05_gemm_wrong_layout.cu", S.INCORRECT_NUMERICAL, None),
    ("06_gemm_oob_write.cu", S.RUNTIME_ERROR, None),
])
def test_the_prepared_judge_gives_the_same_verdict_and_leaves_nothing_prepared(judges, name, status, target):
    source = (CONTROLS_DIR / name).read_text()
    plain, prepared = (judges[on].judge(source, get_problem(GEMM), get_architecture("hopper")) for on in (False, True))
    for r in (plain, prepared):
        assert r.status is status, f"{r.status.value}: {r.reason}"
        if target is not None:
            assert r.target_instruction.status is target
    assert prepared.reason == plain.reason
    assert prepared.target_instruction.family_thread_inst_executed == plain.target_instruction.family_thread_inst_executed
    assert "tools_prepare" in prepared.stage_seconds and "tools_prepare" not in plain.stage_seconds
    assert judges[True].tools._prepared == {}  # used, or closed when the candidate did not reach its tool stage
