"""`ptxbench campaign ...`: one-line errors, validate, status; `deploy` on Prefect's test server."""

from __future__ import annotations

import pytest
import yaml
from prefect.client.orchestration import get_client
from typer.testing import CliRunner

from flows.cli.main import app

runner = CliRunner()


def invoke(*args):
    return runner.invoke(app, list(args))


@pytest.mark.parametrize("args,message", [
    (["campaign", "run", "no/such.yaml"], "error: no such campaign file: no/such.yaml"),
    (["campaign", "validate", "no/such.yaml"], "error: no such campaign file: no/such.yaml"),
    (["campaign", "run", "campaigns/demo.yaml", "--profiler", "gpu-host:8000"],
     "error: --profiler: judge route 'gpu-host:8000': expected auto, local, none, prefect, an http(s) URL, "
     "recorded:PATH or plugin:module:factory"),
    (["campaign", "status", "nope", "--warehouse", "missing.duckdb"], "error: no warehouse at missing.duckdb"),
])
def test_errors_are_one_line_with_nonzero_exit(args, message, repo_root, monkeypatch):
    monkeypatch.chdir(repo_root)
    result = invoke(*args)
    assert result.exit_code == 2 and result.output.strip() == message
    assert "Traceback" not in result.output


def test_invalid_campaign_file_names_key_and_line(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\nmodels:\n  - model: replay/scripted\nturns: 12\n")
    result = invoke("campaign", "validate", str(bad))
    assert result.exit_code == 2
    assert result.output.strip() == f"error: {bad}:4: turns: Input should be less than or equal to 8"


def test_validate_shows_the_grid(repo_root, monkeypatch):
    monkeypatch.chdir(repo_root)
    result = invoke("campaign", "validate", "campaigns/paper.yaml")
    assert result.exit_code == 0, result.output
    assert "= 480 trajectories, at most 3840 turns" in result.output
    assert "hopper: hopper-pack, hopper-guided, hopper-guided-ws" in result.output


def test_prefect_yaml_deployments_point_at_the_flow_and_bundled_campaigns(repo_root):
    spec = yaml.safe_load((repo_root / "prefect.yaml").read_text())
    for dep in spec["deployments"]:
        path, _, name = dep["entrypoint"].partition(":")
        assert (repo_root / path).is_file() and name == "campaign_flow"
        assert (repo_root / dep["parameters"]["config_path"]).is_file()
        assert dep["work_pool"]["name"] == "ptxbench-process" and dep["schedules"][0]["cron"]


def test_deploy_creates_a_scheduled_deployment_on_a_process_pool(prefect_api, repo_root, monkeypatch):
    monkeypatch.chdir(repo_root)
    result = invoke("campaign", "deploy", "campaigns/demo.yaml", "--cron", "30 4 * * 1", "--pool", "ptxbench-test")
    assert result.exit_code == 0, result.output
    assert "deployment campaign/demo" in result.output and "prefect worker start --pool ptxbench-test" in result.output
    with get_client(sync_client=True) as client:
        dep = client.read_deployment_by_name("campaign/demo")
        pool = client.read_work_pool("ptxbench-test")
    assert pool.type == "process" and dep.work_pool_name == "ptxbench-test"
    assert [s.schedule.cron for s in dep.schedules] == ["30 4 * * 1"]
    assert dep.parameters["config_path"].endswith("campaigns/demo.yaml") and dep.entrypoint.endswith("campaign_flow")
    bad = invoke("campaign", "deploy", "campaigns/demo.yaml", "--cron", "every day")
    assert bad.exit_code == 2 and bad.output.startswith("error: --cron 'every day'")
