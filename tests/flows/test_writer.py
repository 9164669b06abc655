"""The single writer: warehouse first, MLflow reconciled from it, so a crash between the two loses nothing."""

from __future__ import annotations

from mlflow import MlflowClient

from flows.tracking import MlflowTracker
from flows.writer import RecordWriter
from ptxcore.agent import parse_campaign, plan_campaign
from ptxcore.schema import EvaluationStatus, StopReason, TurnRecord
from ptxcore.warehouse import Warehouse

CFG = parse_campaign("name: wtest\nmodels: [{model: replay/scripted}]\nproblems: [gemm_n7168_k5120]\n"
                     "prompt_variants: [hopper-pack]\ntrajectories: 1\nturns: 3\n")
PLAN = plan_campaign(CFG)[0]


def turn(n: int) -> TurnRecord:
    return TurnRecord(campaign_id="wtest", trajectory_id=PLAN.trajectory_id, turn=n, model=PLAN.model.model,
                      arch="hopper", gpu="", prompt_variant=PLAN.prompt_variant, problem=PLAN.problem,
                      response_text=f"answer {n}", feedback=f"feedback {n}", status=EvaluationStatus.COMPILE_ERROR)


def test_turns_recorded_only_in_the_warehouse_are_reconciled_once(tmp_path, mlruns):
    uri = f"sqlite:///{mlruns / 'mlflow.db'}"
    wh_path = tmp_path / "wh.duckdb"
    with Warehouse(wh_path) as wh:  # as if the writer died between the DuckDB commit and the MLflow log
        wh.upsert_turns([turn(0), turn(1)])
    writer = RecordWriter(wh_path, lambda: MlflowTracker(uri, "wtest"), {PLAN.trajectory_id: PLAN}).start()
    try:
        writer.call(lambda wh, tr: tr.start_campaign({"name": "wtest"}, "name: wtest\n"))
        assert writer.reconcile_mlflow() == 2
        assert writer.reconcile_mlflow() == 0
        seen = []
        writer.listeners.append(seen.append)
        writer.record_turn(turn(2))
        writer.record_turn(turn(2))  # a repeated record is an idempotent upsert, not a second step
        writer.record_trajectory(PLAN.record(num_turns=3, stop_reason=StopReason.MAX_TURNS))
        keys = writer.call(lambda wh, tr: wh.recorded_turn_keys("wtest"))
    finally:
        writer.close()
    assert keys == {("wtest", PLAN.trajectory_id, n) for n in range(3)} and len(seen) == 2
    client = MlflowClient(uri)
    run = client.search_runs([client.get_experiment_by_name("ptxbench/wtest").experiment_id],
                             filter_string="tags.`ptxbench.kind` = 'trajectory'")[0]
    assert sorted(m.step for m in client.get_metric_history(run.info.run_id, "turn")) == [0, 1, 2]
    assert run.info.status == "FINISHED" and run.data.tags["stop_reason"] == "max_turns"
    text = client.download_artifacts(run.info.run_id, "turns/turn_01/feedback.txt", str(tmp_path))
    assert open(text).read() == "feedback 1"


def test_writer_reports_a_warehouse_it_cannot_open(tmp_path, mlruns):
    import pytest

    bad = tmp_path / "dir.duckdb"
    bad.mkdir()
    writer = RecordWriter(bad, lambda: MlflowTracker(f"sqlite:///{mlruns / 'mlflow.db'}", "w2"), {})
    with pytest.raises(Exception, match="dir.duckdb"):
        writer.start()


def test_reconciliation_leaves_invalidated_turns_out_and_tags_the_run(tmp_path, mlruns):
    from ptxcore.warehouse.invalidation import InvalidationTarget

    uri = f"sqlite:///{mlruns / 'mlflow.db'}"
    wh_path = tmp_path / "wh.duckdb"
    plan = PLAN.model_copy(update={"campaign_id": "winv"})
    with Warehouse(wh_path) as wh:
        wh.upsert_turns([turn(n).model_copy(update={"campaign_id": "winv"}) for n in range(3)])
        wh.invalidate([InvalidationTarget.parse_turn(f"winv/{PLAN.trajectory_id}/1")], "hack found later", "auditor")

    def runs():
        client = MlflowClient(uri)
        exp = client.get_experiment_by_name("ptxbench/winv").experiment_id
        (run,) = client.search_runs([exp], filter_string="tags.`ptxbench.kind` = 'trajectory'")
        return client, run

    writer = RecordWriter(wh_path, lambda: MlflowTracker(uri, "winv"), {PLAN.trajectory_id: plan}).start()
    try:
        writer.call(lambda wh, tr: tr.start_campaign({"name": "winv"}, "name: winv\n"))
        assert writer.reconcile_mlflow() == 2
        client, run = runs()
        assert sorted(m.step for m in client.get_metric_history(run.info.run_id, "turn")) == [0, 2]
        assert run.data.tags["ptxbench.invalid_turns"] == "1: hack found later"
        writer.call(lambda wh, tr: wh.invalidate([InvalidationTarget.parse_turn(f"winv/{PLAN.trajectory_id}/1")],
                                                 "false alarm", "auditor", revoke=True))
        assert writer.reconcile_mlflow() == 1  # revoked: the turn is logged now and the tag goes
    finally:
        writer.close()
    client, run = runs()
    assert sorted(m.step for m in client.get_metric_history(run.info.run_id, "turn")) == [0, 1, 2]
    assert "ptxbench.invalid_turns" not in run.data.tags


def test_a_tracker_without_an_artifact_root_keeps_artifacts_beside_its_database(tmp_path, monkeypatch):
    """MLflow's default artifact location is ./mlruns of the working directory: the tracker never uses it."""
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    uri = f"sqlite:///{tmp_path / 'store' / 'mlflow.db'}"
    (tmp_path / "store").mkdir()
    tracker = MlflowTracker(uri, "wroot")
    tracker.start_campaign({"name": "wroot"}, "name: wroot\n")
    tracker.log_turn(PLAN, turn(0))
    assert not (cwd / "mlruns").exists()
    assert list((tmp_path / "store" / "artifacts" / "wroot").rglob("feedback.txt"))


def test_a_recorded_verdict_is_tagged_on_its_run_and_turn(tmp_path):
    """MLflow showed `correct=1`, `speedup=0.9056` of reused verdicts with nothing saying so."""
    from .fakes import H200_RECORDING as rec
    from .fakes import reused_pass

    judge = reused_pass(PLAN.problem)
    reused = turn(1).model_copy(update={"status": EvaluationStatus.PASSED, "judge": judge, "speedup": 0.9056})
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    tracker = MlflowTracker(uri, "wrec")
    tracker.start_campaign({"name": "wrec"}, "name: wrec\n")
    tracker.log_turn(PLAN, turn(0))
    tracker.log_turn(PLAN, reused)
    tracker.finish_campaign("| headline |", {}, failed=False)
    client = MlflowClient(uri)
    run = client.get_run(tracker.trajectory_run(PLAN))
    assert run.data.tags["ptxbench.recorded"] == rec.label == "NVIDIA H200, driver 580.159.04, 2026-12-01"
    assert run.data.tags["ptxbench.recorded.turn_01"] == rec.label and "ptxbench.recorded.turn_00" not in run.data.tags
    assert [(m.step, m.value) for m in client.get_metric_history(run.info.run_id, "recorded_verdict")] == [(0, 0.0), (1, 1.0)]
    assert client.get_run(tracker.parent_run_id).data.tags["ptxbench.recorded"] == rec.label
    again = MlflowTracker(uri, "wrec")  # a resumed campaign finds the sources it tagged
    assert again.recorded_sources() == [rec.label]
