"""A campaign id is one configuration: a second, different file under the same id is refused (one line, nothing
written), where it used to warn, merge its rows into the first campaign and replace its stored config. Resuming
with the same file keeps working."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from flows.campaign import campaign_flow
from flows.cli.main import app
from flows.preflight import same_campaign_problem
from ptxcore.agent import CampaignConfigError
from ptxcore.schema import CampaignRecord, text_sha256
from ptxcore.warehouse import Warehouse

from .conftest import write_config

FAKE = "tests.flows.fakes:fake_judge"


def state(db):
    with Warehouse(db, read_only=True) as wh:
        return ([(t.key, t.created_at) for t in wh.turns("same")], [t.trajectory_id for t in wh.trajectories("same")],
                wh.campaign("same").config_yaml)


def test_a_different_file_with_the_same_id_is_refused_and_the_same_file_resumes(flow_env):
    tmp, db = flow_env["tmp"], flow_env["tmp"] / "wh.duckdb"
    first = write_config(tmp / "a.yaml", "same", turns=1, problems="[gemm_n7168_k5120]")
    run = {"warehouse": str(db), "mlflow_tracking_uri": flow_env["mlflow_uri"], "judge_plugin": FAKE}
    summary = campaign_flow(config_path=str(first), **run)
    assert summary.errors == [] and summary.turns_recorded == 1
    before = state(db)

    other = write_config(tmp / "b.yaml", "same", turns=1, trajectories=2, problems="[gemm_n7168_k5120, mha_with_lse_d128]")
    with pytest.raises(CampaignConfigError, match="campaign_id 'same' is already recorded with a different configuration"):
        campaign_flow(config_path=str(other), **run)
    renamed = write_config(tmp / "c.yaml", "renamed", turns=1, problems="[gemm_n7168_k5120]")
    r = CliRunner().invoke(app, ["campaign", "run", str(renamed), "--campaign-id", "same", "--warehouse", str(db),
                                 "--mlflow-uri", flow_env["mlflow_uri"]])
    assert r.exit_code == 2 and "Traceback" not in r.output, r.output
    errors = [ln for ln in r.output.splitlines() if ln.startswith("error:")]
    assert len(errors) == 1 and "different configuration" in errors[0] and "--campaign-id NEW" in errors[0]
    assert state(db) == before  # no row merged, the stored config kept

    again = campaign_flow(config_path=str(first), **run)  # the same file resumes: nothing to do, nothing changed
    assert again.errors == [] and again.turns_this_run == 0 and again.turns_recorded == 1
    assert state(db) == before


def test_a_campaign_recorded_without_a_configuration_hash_is_not_continued():
    """Imported data records no configuration (config_sha256 None, also when stored as ""): a run under its id is
    refused, naming that none was recorded; the same file, or no earlier campaign, may run."""
    text = "id: same\n"
    for stored in (None, ""):
        imported = CampaignRecord(campaign_id="same", name="same", config_sha256=stored)
        assert imported.config_sha256 is None
        problem = same_campaign_problem("same", imported, text)
        assert problem is not None and "(sha256 none recorded, this file " in problem and "--campaign-id NEW" in problem
    recorded = CampaignRecord(campaign_id="same", config_yaml=text, config_sha256=text_sha256(text))
    assert same_campaign_problem("same", recorded, text) is None
    assert same_campaign_problem("same", None, text) is None
    problem = same_campaign_problem("same", recorded, "id: same\nturns: 2\n")
    assert problem is not None and f"(sha256 {text_sha256(text)[:12]}, this file " in problem
