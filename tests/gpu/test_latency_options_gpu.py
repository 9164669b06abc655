"""The judge's latency options of issue 27 that are off by default, on the GPU: tool runs prepared while the
candidate's correctness runs (JudgeConfig.prepare_tools) and the session closed after its verdict
(JudgeConfig.defer_session_close). The same verdicts and executed-instruction counts as the default judge, nothing
prepared left once a judgement ends, passed or failed, and every deferred close ended before the next judgement's
GPU work."""

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
    made = {on: GpuJudge(JudgeConfig(cache_dir=tmp_path_factory.mktemp(f"options-{on}"), prepare_tools=on,
                                     defer_session_close=on, **CONFIG))
            for on in (False, True)}
    yield made
    for judge in made.values():
        judge.close()


@pytest.mark.parametrize("name, status, target", [
    ("02_gemm_tma.cu", S.PASSED, T.EXECUTED),
    ("05_gemm_wrong_layout.cu", S.INCORRECT_NUMERICAL, None),
    ("06_gemm_oob_write.cu", S.RUNTIME_ERROR, None),
])
def test_the_judge_with_both_options_gives_the_same_verdict_and_leaves_nothing_behind(judges, name, status, target):
    source = (CONTROLS_DIR / name).read_text()
    plain, prepared = (judges[on].judge(source, get_problem(GEMM), get_architecture("hopper")) for on in (False, True))
    for r in (plain, prepared):
        assert r.status is status, f"{r.status.value}: {r.reason}"
        if target is not None:
            assert r.target_instruction.status is target
    assert prepared.reason == plain.reason
    assert prepared.target_instruction.family_thread_inst_executed == plain.target_instruction.family_thread_inst_executed
    assert "tools_prepare" in prepared.stage_seconds and "tools_prepare" not in plain.stage_seconds
    assert "child_close" in plain.stage_seconds and "child_close" not in prepared.stage_seconds  # closed after
    assert judges[True].tools._prepared == {}  # used, or closed when the candidate did not reach its tool stage
    judges[True].settle()
    assert not judges[True]._closing.pending()
