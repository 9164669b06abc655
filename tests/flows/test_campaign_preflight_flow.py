"""The campaign flow itself (as a deployment runs it) checks its file before it creates anything."""

from __future__ import annotations

import pytest

from flows.campaign import campaign_flow
from ptxcore.agent import CampaignConfigError

from .conftest import write_config


@pytest.mark.parametrize(("model", "extra", "needle"), [
    ("openai/gpt-4o", "    api_key_env: OPENAI_API_KEY\n", "OPENAI_API_KEY is not set"),
    ("openai/gpt-4o", "    api_key_env: PTXBENCH_PROFILER_TOKEN\n", "this project's own variables"),
    ("openai/gpt-4o", "    api_base: http://127.0.0.1:9/v1\n", "not an allowed address"),
    ("nosuchprovider/x", "", "litellm knows no such provider"),
    ("replay/warehouse:earlier", "", "no warehouse at"),
])
def test_a_refused_campaign_leaves_no_warehouse_no_mlflow_run_no_folder(flow_env, monkeypatch, model, extra, needle):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("PTXBENCH_ALLOWED_ENDPOINTS", raising=False)
    tmp = flow_env["tmp"]
    cfg = write_config(tmp / "c.yaml", "refused", model=model, problems="[gemm_n7168_k5120]")
    cfg.write_text(cfg.read_text().replace("architectures:", extra + "architectures:"))
    warehouse, mlruns = tmp / "runs" / "refused" / "wh.duckdb", tmp / "mlruns"
    with pytest.raises(CampaignConfigError, match=needle):
        campaign_flow(config_path=str(cfg), warehouse=str(warehouse), mlflow_tracking_uri=f"sqlite:///{mlruns}/m.db")
    assert not (tmp / "runs").exists() and not mlruns.exists()
