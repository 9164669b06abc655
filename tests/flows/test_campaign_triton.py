"""A Triton campaign end to end (issue 16): turns go through the CPU stage (the Triton validator) and the judge
with their language; without a GPU a valid Triton turn is NOT_EVALUATED, never a compile error."""

from __future__ import annotations

from flows.campaign import campaign_flow
from ptxcore.schema import CompileStatus, EvaluationStatus, Language
from ptxcore.warehouse import Warehouse

FAKE = "tests.flows.fakes:fake_judge"
TRAJECTORY = "replay/scripted-triton/hopper/triton-hopper/gemm_n7168_k5120/0"
CONFIG = """\
name: {name}
models:
  - model: replay/scripted-triton
architectures: [hopper]
language: triton
problems: [gemm_n7168_k5120]
prompt_variants: [triton-hopper]
trajectories: 1
turns: 3
judge_retry_delay_s: 0
"""


def _turns(env, name, **kw):
    cfg = env["tmp"] / f"{name}.yaml"
    cfg.write_text(CONFIG.format(name=name))
    summary = campaign_flow(config_path=str(cfg), warehouse=str(env["tmp"] / "wh.duckdb"),
                            mlflow_tracking_uri=env["mlflow_uri"], **kw)
    assert summary.errors == [] and summary.turns_recorded == 3
    with Warehouse(summary.warehouse, read_only=True) as wh:
        return summary, {t.turn: t for t in wh.turns(name)}


def test_triton_turns_are_validated_then_judged_as_triton(flow_env):
    summary, by = _turns(flow_env, "triton-fake", judge_plugin=FAKE)
    assert summary.judges == {"hopper": "fake"} and set(by) == {0, 1, 2}
    assert [by[i].status for i in range(3)] == [
        EvaluationStatus.REJECTED, EvaluationStatus.COMPILE_ERROR, EvaluationStatus.INCORRECT_NUMERICAL]
    assert "module-as-value" in by[0].compile.reason and "module-as-value" in by[0].feedback
    assert by[1].compile.status is CompileStatus.COMPILE_ERROR and "SyntaxError" in by[1].compile.reason
    judged = by[2]
    assert judged.compile.status is CompileStatus.COMPILED and judged.compile.flags == ["triton"]
    assert judged.gpu == "Fake GPU (tests)"
    assert judged.judge.reason.endswith(f"(judged as {Language.TRITON.value})")


def test_triton_turns_without_a_gpu_are_not_evaluated(flow_env):
    summary, by = _turns(flow_env, "triton-none", profilers={"hopper": "none"})
    assert summary.judges["hopper"] == "none"
    assert [by[i].status for i in range(3)] == [
        EvaluationStatus.REJECTED, EvaluationStatus.COMPILE_ERROR, EvaluationStatus.NOT_EVALUATED]
    assert by[2].compile.status is CompileStatus.COMPILED and by[2].speedup is None and by[2].gpu is None
