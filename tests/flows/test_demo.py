"""The bundled demo campaign end to end (replay/demo, five primary problems), with a fake GPU judge.

Two turns per trajectory instead of the file's five keep it at about ten nvcc builds on a 2-core machine.
"""

from __future__ import annotations

import pytest

from flows.campaign import campaign_flow
from ptxcore.schema import EvaluationStatus
from ptxcore.warehouse import Warehouse


@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_demo_campaign_end_to_end(flow_env, repo_root):
    summary = campaign_flow(config_path=str(repo_root / "campaigns" / "demo.yaml"), turns=2,
                            warehouse=str(flow_env["tmp"] / "demo.duckdb"), mlflow_tracking_uri=flow_env["mlflow_uri"],
                            judge_plugin="tests.flows.fakes:fake_judge")
    assert summary.errors == [] and summary.trajectories_planned == 5 and summary.turns_recorded == 10
    with Warehouse(summary.warehouse, read_only=True) as wh:
        turns = wh.turns("demo")
    assert {t.problem for t in turns} == {"gemm_n7168_k5120", "mha_with_lse_d128", "mha_with_lse_d128_causal",
                                          "mha_bwd_d128", "mha_bwd_d128_causal"}
    assert all(t.status is not EvaluationStatus.EXTRACTION_ERROR for t in turns)
    assert all(t.compile is not None and t.compile.toolkit_version for t in turns)  # real nvcc verdicts
    judged = [t for t in turns if t.judge is not None]
    assert judged and all(t.gpu == "Fake GPU (tests)" for t in judged)
    assert "| replay/demo | hopper | 5 | 10 |" in summary.headline_markdown
