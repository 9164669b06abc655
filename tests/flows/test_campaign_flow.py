"""The campaign flow end to end on Prefect's test server: scripted replay model, real compile, fake judge."""

from __future__ import annotations

from collections import Counter

import pytest
from mlflow import MlflowClient
from prefect.client.orchestration import get_client

from flows.campaign import campaign_flow
from ptxcore.schema import EvaluationStatus, StopReason
from ptxcore.warehouse import Warehouse

from .conftest import write_config

FAKE = "tests.flows.fakes:fake_judge"
GEMM = "replay/scripted/hopper/hopper-pack/gemm_n7168_k5120/0"
MHA = "replay/scripted/hopper/hopper-pack/mha_with_lse_d128/0"


def run(env, name, **kw):
    cfg = write_config(env["tmp"] / f"{name}.yaml", name,
                       **{k: kw.pop(k) for k in ("model", "slots", "problems") if k in kw})
    return campaign_flow(config_path=str(cfg), warehouse=str(env["tmp"] / "wh.duckdb"),
                         mlflow_tracking_uri=env["mlflow_uri"], **kw)


def test_campaign_end_to_end_then_resume_without_duplicates(flow_env):
    summary = run(flow_env, "e2e", judge_plugin=FAKE)
    assert summary.errors == [] and summary.judges == {"hopper": "fake"}
    assert summary.trajectories_planned == 2 and summary.turns_recorded == 6 == summary.turns_this_run
    with Warehouse(summary.warehouse, read_only=True) as wh:
        turns = wh.turns("e2e")
        trajs = {t.trajectory_id: t for t in wh.trajectories("e2e")}
    by = {(t.trajectory_id, t.turn): t for t in turns}
    assert [by[(GEMM, i)].status for i in range(3)] == [
        EvaluationStatus.EXTRACTION_ERROR, EvaluationStatus.COMPILE_ERROR, EvaluationStatus.INCORRECT_NUMERICAL]
    assert [by[(MHA, i)].status for i in range(3)] == [EvaluationStatus.INCORRECT_NUMERICAL] * 3
    assert "max_abs_error=3.5" in by[(MHA, 0)].feedback and by[(MHA, 0)].gpu == "Fake GPU (tests)"
    assert by[(GEMM, 1)].compile.status.value == "COMPILE_ERROR" and 'expected a ";"' in by[(GEMM, 1)].feedback
    assert {t.stop_reason for t in trajs.values()} == {StopReason.MAX_TURNS} and trajs[GEMM].num_turns == 3
    assert "| replay/scripted | hopper | 2 | 6 |" in summary.headline_markdown

    _check_mlflow_matches(flow_env["mlflow_uri"], "e2e", turns)
    _check_prefect_names_limits_artifacts()

    again = run(flow_env, "e2e", judge_plugin=FAKE)
    assert again.turns_this_run == 0 and again.trajectories_run == 0 and again.turns_recorded == 6
    with Warehouse(summary.warehouse, read_only=True) as wh:
        assert [(t.key, t.created_at) for t in wh.turns("e2e")] == [(t.key, t.created_at) for t in turns]
    _check_mlflow_matches(flow_env["mlflow_uri"], "e2e", turns)


def _check_mlflow_matches(uri, campaign_id, turns):
    client = MlflowClient(uri)
    exp = client.get_experiment_by_name(f"ptxbench/{campaign_id}")
    runs = client.search_runs([exp.experiment_id])
    parents = [r for r in runs if r.data.tags.get("ptxbench.kind") == "campaign"]
    children = [r for r in runs if r.data.tags.get("ptxbench.kind") == "trajectory"]
    assert len(parents) == 1 and len(children) == len({t.trajectory_id for t in turns})
    for child in children:
        assert child.data.tags["mlflow.parentRunId"] == parents[0].info.run_id
        tid = child.data.tags["ptxbench.trajectory_id"]
        expected = sorted(t.turn for t in turns if t.trajectory_id == tid)
        history = client.get_metric_history(child.info.run_id, "turn")
        assert sorted(m.step for m in history) == expected  # one entry per step: no duplicates
        statuses = {t.turn: t.status for t in turns if t.trajectory_id == tid}
        correct = {m.step for m in client.get_metric_history(child.info.run_id, "correct")}
        assert correct == {s for s, st in statuses.items() if st.counts_against_model}
        arts = {a.path for a in client.list_artifacts(child.info.run_id, f"turns/turn_{expected[-1]:02d}")}
        assert f"turns/turn_{expected[-1]:02d}/feedback.md" in arts


def _check_prefect_names_limits_artifacts():
    with get_client(sync_client=True) as client:
        flow_names = {f.name for f in client.read_flow_runs()}
        task_names = {t.name for t in client.read_task_runs(limit=200)}
        limit = client.read_concurrency_limit_by_tag("gpu:hopper")
        artifacts = {a.key for a in client.read_artifacts() if a.key}
    assert "campaign e2e" in flow_names
    assert "replay/scripted / hopper / hopper-pack / gemm_n7168_k5120 / #0" in flow_names
    for kind in ("generate", "compile", "judge", "record"):
        assert f"{kind} replay/scripted / hopper / hopper-pack / mha_with_lse_d128 / #0 / turn 2" in task_names
    assert limit.concurrency_limit == 1
    assert {"e2e-progress", "e2e-headline", "e2e-headline-table", "e2e-status"} <= artifacts


def test_target_speedup_stops_early_and_infra_errors_are_retried(flow_env, monkeypatch):
    infra = flow_env["tmp"] / "infra-once"
    infra.write_text("")
    monkeypatch.setenv("FAKE_JUDGE_INFRA_FILE", str(infra))
    monkeypatch.setenv("FAKE_JUDGE_SPEEDUP", "1.5")
    summary = run(flow_env, "fast", judge_plugin=FAKE, slots=2)
    assert not infra.exists()  # the fake judge returned INFRA_ERROR once ...
    with Warehouse(summary.warehouse, read_only=True) as wh:
        turns = wh.turns("fast")
        trajs = {t.trajectory_id: t for t in wh.trajectories("fast")}
    assert all(t.status is not EvaluationStatus.INFRA_ERROR for t in turns)  # ... and the retry replaced it
    assert Counter(t.trajectory_id for t in turns) == {GEMM: 3, MHA: 1}
    assert trajs[MHA].stop_reason is StopReason.TARGET_REACHED and trajs[MHA].best_speedup == 1.5
    assert trajs[GEMM].stop_reason is StopReason.TARGET_REACHED  # its third turn was the first to compile
    with get_client(sync_client=True) as client:
        assert client.read_concurrency_limit_by_tag("gpu:hopper").concurrency_limit == 2
        judge_runs = [t for t in client.read_task_runs(limit=200) if t.name.startswith("judge ")]
    assert any(t.run_count == 2 for t in judge_runs)


def test_no_gpu_means_not_evaluated_and_warehouse_replay_rejudges(flow_env, monkeypatch):
    monkeypatch.setenv("PTXBENCH_FORCE_NO_GPU", "1")
    first = run(flow_env, "cpu-only", problems="[gemm_n7168_k5120]")
    assert first.judges == {"hopper": "none"}
    with Warehouse(first.warehouse, read_only=True) as wh:
        original = wh.turns("cpu-only")
    compiled = [t for t in original if t.compile is not None and t.compile.status.value == "COMPILED"]
    assert compiled and all(t.status is EvaluationStatus.NOT_EVALUATED and t.speedup is None for t in compiled)
    assert all("Not evaluated on a GPU" in t.feedback for t in compiled)
    assert "NOT_EVALUATED" in first.headline_markdown

    rejudged = run(flow_env, "rejudge", model="replay/warehouse:cpu-only", judge_plugin=FAKE,
                   problems="[gemm_n7168_k5120]")
    with Warehouse(rejudged.warehouse, read_only=True) as wh:
        again = wh.turns("rejudge")
    old = {(t.problem, t.turn): t for t in original}
    assert len(again) == len(original)
    for t in again:
        assert t.response_text == old[(t.problem, t.turn)].response_text
        assert t.kernel_sha256 == old[(t.problem, t.turn)].kernel_sha256
    assert {t.status for t in again if t.kernel_sha256} <= {EvaluationStatus.INCORRECT_NUMERICAL,
                                                           EvaluationStatus.COMPILE_ERROR}
    assert pytest.approx(0) == sum(t.usage.cost_usd or 0 for t in again)


def test_a_failing_trajectory_is_reported_and_does_not_stop_the_others(flow_env):
    summary = run(flow_env, "partial", judge_plugin=FAKE, problems="[gemm_n7168_k5120, mha_bwd_d128]")
    assert len(summary.errors) == 1 and summary.errors[0].startswith(
        "replay/scripted/hopper/hopper-pack/mha_bwd_d128/0: BadRequestError")
    assert "no script for mha_bwd_d128" in summary.errors[0]
    with Warehouse(summary.warehouse, read_only=True) as wh:
        trajs = {t.problem: t for t in wh.trajectories("partial")}
        turns = wh.turns("partial")
    assert trajs["mha_bwd_d128"].stop_reason is StopReason.ERROR and trajs["mha_bwd_d128"].num_turns == 0
    assert trajs["gemm_n7168_k5120"].stop_reason is StopReason.MAX_TURNS and len(turns) == 3
    client = MlflowClient(flow_env["mlflow_uri"])
    exp = client.get_experiment_by_name("ptxbench/partial")
    statuses = {r.data.tags.get("problem"): r.info.status for r in client.search_runs([exp.experiment_id])
                if r.data.tags.get("ptxbench.kind") == "trajectory"}
    assert statuses == {"mha_bwd_d128": "FAILED", "gemm_n7168_k5120": "FINISHED"}
