"""The campaign flow end to end on Prefect's test server: scripted replay model, real compile, fake judge."""

from __future__ import annotations

import json
from collections import Counter

import pytest
from mlflow import MlflowClient
from prefect.client.orchestration import get_client
from prefect.client.schemas.filters import (
    ArtifactFilter,
    ArtifactFilterFlowRunId,
    FlowRunFilter,
    FlowRunFilterId,
    FlowRunFilterTags,
    LogFilter,
    LogFilterFlowRunId,
)

from flows.campaign import campaign_flow
from ptxcore.schema import EvaluationStatus, StopReason
from ptxcore.warehouse import Warehouse

from .conftest import write_config

FAKE = "tests.flows.fakes:fake_judge"
GEMM = "replay/scripted/hopper/hopper-pack/gemm_n7168_k5120/0"
MHA = "replay/scripted/hopper/hopper-pack/mha_with_lse_d128/0"
GEMM_LABEL = "replay/scripted / hopper / hopper-pack / gemm_n7168_k5120 / #0"
MHA_LABEL = "replay/scripted / hopper / hopper-pack / mha_with_lse_d128 / #0"


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
    exp_id = MlflowClient(flow_env["mlflow_uri"]).get_experiment_by_name("ptxbench/e2e").experiment_id
    assert summary.mlflow_ui_path == f"#/experiments/{exp_id}?workflowType=machine_learning"  # opens on the runs
    _check_prefect_names_limits_artifacts()

    again = run(flow_env, "e2e", judge_plugin=FAKE)
    assert again.turns_this_run == 0 and again.trajectories_run == 0 and again.turns_recorded == 6
    _check_resume_is_named_and_linked()
    with Warehouse(summary.warehouse, read_only=True) as wh:
        assert [(t.key, t.created_at) for t in wh.turns("e2e")] == [(t.key, t.created_at) for t in turns]
    _check_mlflow_matches(flow_env["mlflow_uri"], "e2e", turns)


def _check_resume_is_named_and_linked():
    """A resumed campaign run had the first run's name: now "campaign e2e · resume 1", with an artifact linking the
    first run."""
    from flows.artifacts import _campaign_runs

    with get_client(sync_client=True) as client:
        first, resumed = _campaign_runs(client, "e2e")
        artifacts = client.read_artifacts(artifact_filter=ArtifactFilter(
            flow_run_id=ArtifactFilterFlowRunId(any_=[resumed.id])))
    assert (first.name, resumed.name) == ("campaign e2e", "campaign e2e · resume 1")
    (note,) = [a for a in artifacts if a.key == "e2e-resume"]
    assert f"/runs/flow-run/{first.id})" in note.data and "[campaign e2e]" in note.data


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
        last = f"turns/turn_{expected[-1]:02d}"
        arts = {a.path for a in client.list_artifacts(child.info.run_id, last)}
        assert {f"{last}/feedback.txt", f"{last}/response.md"} <= arts  # plain text: the viewer keeps line breaks
        if any(t.kernel_text for t in turns if t.trajectory_id == tid and t.turn == expected[-1]):
            assert {f"{last}/kernel.cu", f"{last}/kernel.cu.txt"} <= arts  # .cu to download, .cu.txt to preview
    assert exp.tags["mlflow.experimentKind"] == "custom_model_development"  # MLflow 3 opens it on its runs
    names = sorted(c.info.run_name for c in children)
    assert names == sorted({t.problem for t in turns})  # only the problem varies: the names say just that


def _check_prefect_names_limits_artifacts():
    with get_client(sync_client=True) as client:
        flows = {f.name: f for f in client.read_flow_runs(
            flow_run_filter=FlowRunFilter(tags=FlowRunFilterTags(all_=["campaign:e2e"])))}
        tasks = {t.name: t for t in client.read_task_runs(
            flow_run_filter=FlowRunFilter(id=FlowRunFilterId(any_=[f.id for f in flows.values()])), limit=200)}
        limit = client.read_concurrency_limit_by_tag("gpu:hopper")
        artifacts = client.read_artifacts(artifact_filter=ArtifactFilter(
            flow_run_id=ArtifactFilterFlowRunId(any_=[f.id for f in flows.values()])))
    campaign, gemm = flows["campaign e2e"], flows[f"e2e: {GEMM_LABEL}"]
    assert {"campaign:e2e", "model:replay/scripted", "arch:hopper"} <= set(campaign.tags)
    assert {"campaign:e2e", "problem:gemm_n7168_k5120", "variant:hopper-pack", "arch:hopper"} <= set(gemm.tags)
    assert (campaign.state.name, campaign.state.type.value) == ("Completed", "COMPLETED")
    assert campaign.state.message.startswith("6 turns (6 this run): 4 INCORRECT_NUMERICAL")
    assert (gemm.state.name, gemm.state.type.value) == ("INCORRECT_NUMERICAL", "COMPLETED")
    assert gemm.state.message == ("max_turns after 3 turns: EXTRACTION_ERROR → COMPILE_ERROR → INCORRECT_NUMERICAL")
    for kind in ("generate", "compile", "judge", "record"):
        assert f"{kind} e2e: {MHA_LABEL} / turn 2" in tasks
    # each task run is named by its outcome; a failed build is a Completed run named COMPILE_ERROR
    assert tasks[f"compile e2e: {GEMM_LABEL} / turn 1"].state.name == "COMPILE_ERROR"
    assert tasks[f"record e2e: {GEMM_LABEL} / turn 0"].state.name == "EXTRACTION_ERROR"
    judge = tasks[f"judge e2e: {MHA_LABEL} / turn 0"].state
    assert (judge.name, judge.message) == ("INCORRECT_NUMERICAL", "mismatch in 100% of elements")
    # one node per trajectory: each trajectory flow run's parent task sits in the campaign run, and no run
    # depends on another trajectory's runs (turn t+1 waits for turn t: the only edges drawn)
    placeholders = [t for t in tasks.values() if t.flow_run_id == campaign.id]
    assert len(placeholders) == 2 and all(not any(t.task_inputs.values()) for t in placeholders)
    assert {f.parent_task_run_id for f in flows.values() if f.id != campaign.id} == {t.id for t in placeholders}
    by_id = {t.id: t for t in tasks.values()}
    for t in tasks.values():
        ups = [by_id[i.id] for v in t.task_inputs.values() for i in v if i.id in by_id]
        assert all(u.flow_run_id == t.flow_run_id for u in ups) and len(ups) <= 1, (t.name, [u.name for u in ups])
    assert [u.name for v in tasks[f"judge e2e: {MHA_LABEL} / turn 0"].task_inputs.values() for u in
            (by_id[i.id] for i in v)] == [f"compile e2e: {MHA_LABEL} / turn 0"]
    assert limit.concurrency_limit == 1
    keyed = {a.key: a for a in artifacts if a.key}
    assert {"e2e-progress", "e2e-headline", "e2e-headline-table", "e2e-status"} <= set(keyed)
    assert "6 of at most 6 turns recorded, 2 of 2 trajectories done" in keyed["e2e-progress"].description
    tables = [a for a in artifacts if a.type == "table" and a.flow_run_id == gemm.id]
    assert len(tables) == 1 and [r["status"] for r in json.loads(tables[0].data)] == [
        "EXTRACTION_ERROR", "COMPILE_ERROR", "INCORRECT_NUMERICAL"]


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
    assert "NOT_EVALUATED" in first.headline_markdown and "| 1/3 (33%) | 0/1 (0%) (no GPU) | not evaluated |" in first.headline_markdown
    with get_client(sync_client=True) as client:
        (campaign,) = [f for f in client.read_flow_runs(
            flow_run_filter=FlowRunFilter(tags=FlowRunFilterTags(all_=["campaign:cpu-only"]))) if f.name == "campaign cpu-only"]
        logs = client.read_logs(log_filter=LogFilter(flow_run_id=LogFilterFlowRunId(any_=[campaign.id])))
    warning = [g for g in logs if g.name == "flows.campaign" and "no hopper GPU" in g.message]
    assert warning and warning[0].level == 30 and "NOT_EVALUATED" in warning[0].message  # ptxcore/flows logs reach Prefect
    assert campaign.state.name == "NOT_EVALUATED" and "NOT_EVALUATED" in campaign.state.message
    ml = MlflowClient(flow_env["mlflow_uri"])
    exp = ml.get_experiment_by_name("ptxbench/cpu-only")
    for r in ml.search_runs([exp.experiment_id]):
        if r.data.tags.get("ptxbench.kind") == "campaign":  # nothing judged: no correctness metric at all
            assert "correct_turns" not in r.data.metrics and r.data.metrics["gpu_judged_turns"] == 0
            continue
        steps = {m.step for m in ml.get_metric_history(r.info.run_id, "correct")}
        assert steps == {t.turn for t in original if t.status.counts_against_model}  # NOT_EVALUATED: no value

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
