"""A campaign killed with SIGKILL mid-run and resumed ends with exactly the planned turns, no duplicates,
and MLflow agreeing with the warehouse. The campaign runs as `ptxbench campaign run` in a subprocess
against the session's Prefect test server."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections import Counter

import pytest
from mlflow import MlflowClient

from ptxcore.warehouse import Warehouse

from .conftest import write_config

CLI = "from flows.cli.main import app; app()"


def cli_env(flow_env, **extra) -> dict[str, str]:
    env = dict(os.environ)
    env.update(PREFECT_API_URL=flow_env["api"], PTXBENCH_LOG="INFO", PREFECT_LOGGING_LEVEL="WARNING", **extra)
    return env


def campaign_cmd(cfg, flow_env) -> list[str]:
    return [sys.executable, "-c", CLI, "campaign", "run", str(cfg), "--warehouse", str(flow_env["tmp"] / "wh.duckdb"),
            "--mlflow-uri", flow_env["mlflow_uri"], "--judge-plugin", "tests.flows.fakes:fake_judge"]


@pytest.mark.slow
@pytest.mark.timeout(1200)  # its own waits: 420 s for the kill, 600 s for the resume
def test_sigkill_then_resume_gives_exactly_the_planned_turns(flow_env, repo_root):
    cfg = write_config(flow_env["tmp"] / "killme.yaml", "killme", slots=4, trajectories=2,
                       problems="[mha_with_lse_d128]")
    planned = 2 * 3
    proc = subprocess.Popen(campaign_cmd(cfg, flow_env), cwd=repo_root, env=cli_env(flow_env, FAKE_JUDGE_DELAY_S="1"),
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    recorded_lines = []
    deadline = time.monotonic() + 420
    try:
        for line in proc.stderr:
            if "recorded turn" in line:
                recorded_lines.append(line)
                if len(recorded_lines) == 2:
                    break
            assert time.monotonic() < deadline, "campaign did not record two turns in time"
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    assert proc.returncode == -signal.SIGKILL and len(recorded_lines) == 2

    with Warehouse(flow_env["tmp"] / "wh.duckdb", read_only=True) as wh:
        before = {t.key: t.created_at for t in wh.turns("killme")}
    assert 2 <= len(before) < planned  # killed mid-run

    done = subprocess.run(campaign_cmd(cfg, flow_env), cwd=repo_root, env=cli_env(flow_env), capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "NOT_EVALUATED" not in done.stdout and "headline" in done.stdout

    with Warehouse(flow_env["tmp"] / "wh.duckdb", read_only=True) as wh:
        turns = wh.turns("killme")
        trajectories = wh.trajectories("killme")
    keys = [t.key for t in turns]
    assert len(keys) == planned == len(set(keys))
    assert Counter(t.trajectory_id for t in turns) == {tr.trajectory_id: 3 for tr in trajectories}
    assert all(tr.num_turns == 3 and tr.stop_reason.value == "max_turns" for tr in trajectories)
    after = {t.key: t.created_at for t in turns}
    assert all(after[k] == v for k, v in before.items())  # turns recorded before the kill were not redone

    client = MlflowClient(flow_env["mlflow_uri"])
    exp = client.get_experiment_by_name("ptxbench/killme")
    children = [r for r in client.search_runs([exp.experiment_id]) if r.data.tags.get("ptxbench.kind") == "trajectory"]
    assert len(children) == len(trajectories)
    for child in children:
        steps = [m.step for m in client.get_metric_history(child.info.run_id, "turn")]
        tid = child.data.tags["ptxbench.trajectory_id"]
        assert sorted(steps) == sorted(t.turn for t in turns if t.trajectory_id == tid) == [0, 1, 2]
        assert child.info.status == "FINISHED"
