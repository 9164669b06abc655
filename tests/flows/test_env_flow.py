"""Environment runs recorded like campaigns: warehouse rows (turns + env_steps), MLflow runs, SQL re-scoring,
and `ptxbench report` on the rollouts. Real CPU stages (sandboxed nvcc, session cache), the fake judge."""

from __future__ import annotations

import pytest

from flows.env import play
from flows.replay import make_client
from ptxcore.agent import ModelSpec
from ptxcore.gym import EnvSpec, RewardSpec, reward_facts, score
from ptxcore.gym.rescore import rescore_sql
from ptxcore.schema import EvaluationStatus, StopReason
from ptxcore.warehouse import Warehouse

FAKE = "plugin:tests.flows.fakes:fake_judge"


@pytest.fixture
def env_run(compile_cache_dir, tmp_path, monkeypatch):
    monkeypatch.setenv("PTXBENCH_CACHE_DIR", str(compile_cache_dir))
    monkeypatch.setenv("FAKE_JUDGE_SPEEDUP", "1.5")
    spec = EnvSpec(run_id="rl-flow", problem="gemm_n7168_k5120", max_turns=3, policy_model="replay/scripted",
                   reward=RewardSpec(gamma=0.9))
    uri = f"sqlite:///{tmp_path / 'mlruns' / 'mlflow.db'}"
    (tmp_path / "mlruns").mkdir()
    results = play([spec], make_client(ModelSpec(model="replay/scripted"), "policy"), route=FAKE, recorded=None,
                   warehouse=tmp_path / "wh.duckdb", tracking_uri=uri, episodes=2, concurrency=2)
    return spec, results, tmp_path / "wh.duckdb", uri


def test_episodes_are_trajectories_and_steps_are_turns(env_run):
    spec, results, path, _ = env_run
    assert len(results) == 2 and len({r.trajectory_id for r in results}) == 2
    with Warehouse(path, read_only=True) as wh:
        turns = wh.turns("rl-flow")
        trajectories = {t.trajectory_id: t for t in wh.trajectories("rl-flow")}
        _, steps = wh.sql("SELECT trajectory_id, turn, reward, reward_spec_sha256, source, policy_model "
                          "FROM env_steps ORDER BY trajectory_id, turn")
        _, returns = wh.sql("SELECT trajectory_id, discounted_return FROM v_env_returns ORDER BY trajectory_id")
        _, specs = wh.sql("SELECT sha256 FROM env_reward_specs")
    assert len(turns) == len(steps) == sum(len(r.rewards) for r in results)
    assert {s[3] for s in steps} == {spec.reward.sha256} == {s[0] for s in specs}
    assert {s[4] for s in steps} == {"environment"} and {s[5] for s in steps} == {"replay/scripted"}
    by_key = {(t.trajectory_id, t.turn): t for t in turns}
    for trajectory_id, turn, reward, *_ in steps:  # the recorded reward is the spec's score of the recorded turn
        assert reward == pytest.approx(score(spec.reward, reward_facts(by_key[(trajectory_id, turn)])).total)
    for r in results:
        assert trajectories[r.trajectory_id].stop_reason is r.stop_reason is StopReason.TARGET_REACHED
        assert dict(returns)[r.trajectory_id] == pytest.approx(r.discounted_return)
        assert r.statuses[-1] is EvaluationStatus.PASSED


def test_rescoring_by_sql_equals_the_python_score(env_run):
    _, _, path, _ = env_run
    other = RewardSpec(name="harsh", compiled=0.0, correct=1.0, target_carries=2.0, speedup_per_log2=1.0,
                       speedup_log2_min=-1.0, gamma=0.5)
    with Warehouse(path, read_only=True) as wh:
        columns, rows = wh.sql(rescore_sql(other))
        turns = {(t.trajectory_id, t.turn): t for t in wh.turns("rl-flow")}
    assert rows
    for row in rows:
        got = dict(zip(columns, row, strict=True))
        expected = score(other, reward_facts(turns[(got["trajectory_id"], got["turn"])])).total
        assert got["reward"] == pytest.approx(expected)
        assert got["discounted_reward"] == pytest.approx(expected * 0.5 ** got["turn"])


def test_mlflow_has_the_episodes_with_rewards(env_run):
    from mlflow import MlflowClient

    _, results, _, uri = env_run
    client = MlflowClient(tracking_uri=uri)
    experiment = client.get_experiment_by_name("ptxbench/rl-flow")
    runs = client.search_runs([experiment.experiment_id])
    episodes = [r for r in runs if r.data.tags.get("ptxbench.kind") == "trajectory"]
    assert {r.data.tags["ptxbench.source"] for r in runs} == {"environment"}
    assert len(episodes) == 2
    for run in episodes:
        history = client.get_metric_history(run.info.run_id, "reward")
        result = next(r for r in results if r.trajectory_id == run.data.tags["ptxbench.trajectory_id"])
        assert [m.value for m in sorted(history, key=lambda m: m.step)] == pytest.approx(result.rewards)


def test_report_renders_the_rollouts(env_run, tmp_path):
    from typer.testing import CliRunner

    from flows.cli.main import app

    _, _, path, _ = env_run
    out = CliRunner().invoke(app, ["report", "rl-flow", "--db", str(path), "--out", str(tmp_path / "report")])
    assert out.exit_code == 0, out.output
    assert "gemm_n7168_k5120" in (tmp_path / "report" / "report.md").read_text()
