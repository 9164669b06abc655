"""Multi-host for real: a campaign host and a GPU host in two network namespaces joined by a veth pair.

campaign host (SUBNET.1): `prefect server start` (long-lived, bound to its veth address) and
    `ptxbench campaign run ... --profiler hopper=prefect` (no GPU, no judge of its own);
GPU host (SUBNET.2): `ptxbench profiler serve --fake` on its loopback and
    `ptxbench worker --arch hopper --profiler http://127.0.0.1:8765`, talking to the server over the veth.
Prefect's result storage is one directory both hosts see (PREFECT_LOCAL_STORAGE_PATH), as an NFS mount would be
on a cluster. Mid-run the GPU host crashes (SIGKILL of every process in its namespace while a judgement runs) and
comes back; the campaign must finish with every turn recorded once and every judgement scored once.
"""

from __future__ import annotations

import json
import sqlite3
import sys
import time
from pathlib import Path

import pytest

from ptxcore.schema import EvaluationStatus
from ptxcore.warehouse import Warehouse
from tests.waiting import wait_for

from .netns import Host, clean_env, host_pair, netns_unavailable

pytestmark = [pytest.mark.slow, pytest.mark.netns, pytest.mark.timeout(2400)]  # its own waits add up to ~2300 s

CLI = "from flows.cli.main import app; app()"
PREFECT = str(Path(sys.executable).with_name("prefect"))
PROBE = "tests/hosts/probe.py"
TRAJECTORIES, TURNS = 2, 3
FAKE_EVAL_S = 6.0  # each fake judgement: long enough that the crash surely lands inside one
WORKER_TIMEOUT_S = 60  # the campaign gives up on a judge task run after this and retries the judgement
CAMPAIGN = f"""\
name: twohosts
models:
  - model: replay/scripted
architectures: [hopper]
problems: [mha_with_lse_d128]
prompt_variants: [hopper-pack]
trajectories: {TRAJECTORIES}
turns: {TURNS}
judge_retry_delay_s: 0
concurrency:
  trajectories: {TRAJECTORIES}
  compile: 1
  gpu_slots: {{hopper: 1}}
"""


@pytest.fixture
def hosts(tmp_path):
    reason = netns_unavailable()
    if reason:
        pytest.skip(reason)
    with host_pair(tmp_path, ("campaign", "gpu")) as pair:
        yield pair


def _probe(host: Host, repo: Path, *args: str, timeout_s: float = 120) -> dict:
    out = host.run([sys.executable, PROBE, *args], env=clean_env(), cwd=repo, timeout_s=timeout_s + 60)
    assert out.returncode == 0, f"probe {args} on {host.role}: {out.stdout} {out.stderr[-2000:]}"
    return json.loads(out.stdout)


def _start_gpu_host(gpu: Host, repo: Path, api: str, shared: Path) -> None:
    """The GPU host's two services, as its operator would start them (docs/gpu-host.md, "Many GPU hosts"); the worker
    finds the service's per-start token in the token directory they share (as one user's home on a real host)."""
    tokens = {"PTXBENCH_PROFILER_TOKEN_DIR": str(gpu.root / "profiler-tokens")}
    gpu.popen("profiler", [sys.executable, "-c", CLI, "profiler", "serve", "--gpus", "0", "--fake", "--port", "8765",
                           "--runner-args", json.dumps({"eval_s": FAKE_EVAL_S}), "--work-dir",
                           str(gpu.root / "profiler")], env=clean_env(**tokens), cwd=repo)
    _probe(gpu, repo, "wait-http", "http://127.0.0.1:8765/health", "240", timeout_s=240)
    env = clean_env(PREFECT_API_URL=api, PREFECT_HOME=str(gpu.root / "prefect-home"),
                    PREFECT_LOCAL_STORAGE_PATH=str(shared), PREFECT_LOGGING_LEVEL="WARNING", **tokens)
    gpu.popen("worker", [sys.executable, "-c", CLI, "worker", "--arch", "hopper", "--profiler",
                         "http://127.0.0.1:8765"], env=env, cwd=repo)
    def serving() -> bool:
        assert gpu.procs["worker"].poll() is None, gpu.log("worker")[-3000:]
        return "serving judge-on-hopper" in gpu.log("worker").rsplit("--- start", 1)[-1]

    # serving is enough: a judge task delayed before the worker subscribes waits in the server's queue
    wait_for(serving, 240, "the GPU host's worker to serve judge-on-hopper", interval_s=0.5)


def test_campaign_finishes_after_the_gpu_host_crashes(hosts, tmp_path, repo_root, compile_cache_dir):
    t0 = time.monotonic()
    campaign, gpu = hosts
    shared = tmp_path / "nfs" / "prefect-results"  # the one thing both hosts mount
    shared.mkdir(parents=True)
    api = f"http://{campaign.address}:4200/api"
    campaign.popen("prefect-server", [PREFECT, "server", "start", "--host", campaign.address, "--port", "4200"],
                   env=clean_env(PREFECT_HOME=str(campaign.root / "server-home"),
                                 PREFECT_SERVER_ANALYTICS_ENABLED="false", PREFECT_UI_ENABLED="false",
                                 PREFECT_SERVER_LOGGING_LEVEL="WARNING",
                                 PREFECT_SERVER_TASKS_TAG_CONCURRENCY_SLOT_WAIT_SECONDS="1"), cwd=repo_root)
    _probe(gpu, repo_root, "wait-http", f"{api}/health", "300", timeout_s=300)  # reached over the veth
    _start_gpu_host(gpu, repo_root, api, shared)

    cfg = tmp_path / "twohosts.yaml"
    cfg.write_text(CAMPAIGN)
    wh = campaign.root / "warehouse.duckdb"
    run = campaign.popen("campaign", [
        sys.executable, "-c", CLI, "campaign", "run", str(cfg), "--profiler", "hopper=prefect", "--warehouse",
        str(wh), "--mlflow-uri", f"sqlite:///{campaign.root / 'mlruns' / 'mlflow.db'}", "--json"],
        env=clean_env(PREFECT_API_URL=api, PREFECT_HOME=str(campaign.root / "client-home"),
                      PREFECT_LOCAL_STORAGE_PATH=str(shared), PTXBENCH_CACHE_DIR=str(compile_cache_dir),
                      PTXBENCH_WORKER_TIMEOUT_S=str(WORKER_TIMEOUT_S)), cwd=repo_root, split=True)

    caught = _probe(gpu, repo_root, "wait-fresh-task", "http://127.0.0.1:8765", "2", "600", timeout_s=600)
    killed = gpu.crash()
    t_crash = time.monotonic()
    assert killed and run.poll() is None, (caught, campaign.log("campaign")[-3000:])
    assert gpu.pids() == [], "the GPU host is down (crash() returns once nothing of it runs)"
    _start_gpu_host(gpu, repo_root, api, shared)
    rc = run.wait(900)
    log = campaign.log("campaign")
    assert rc == 0, log[-4000:] + gpu.log("worker")[-2000:]
    summary = json.loads((campaign.root / "campaign.out").read_text())
    seen = _probe(campaign, repo_root, "runs", api)
    gpu.crash()  # stop the GPU host's services before reading its task store

    # Nothing lost, nothing doubled: every (trajectory, turn) once, each judged on the GPU host.
    expected = TRAJECTORIES * TURNS
    assert summary["errors"] == [] and summary["judges"] == {"hopper": "prefect-worker:hopper"}
    assert summary["turns_recorded"] == expected
    with Warehouse(wh, read_only=True) as store:
        turns = store.turns("twohosts")
    keys = [(t.trajectory_id, t.turn) for t in turns]
    assert len(keys) == len(set(keys)) == expected
    assert {t.status for t in turns} == {EvaluationStatus.PASSED}  # the fake engine's verdict, not NOT_EVALUATED
    assert {t.gpu for t in turns} == {"FAKE GPU (no judge ran)"}

    # Prefect: one completed judge-on-hopper task run per turn; the crashed one stays behind, never completed;
    # the campaign's judge task of that turn was retried once.
    remote = [r for r in seen["task_runs"] if r["name"].startswith("judge-on-hopper ")]
    done = [r for r in remote if r["state_type"] == "COMPLETED"]
    orphans = [r for r in remote if r["state_type"] != "COMPLETED"]
    assert len(done) == expected, remote
    assert {r["state_name"] for r in done} == {"Completed"}, remote  # judged, none `Cached` from an earlier turn
    assert len(orphans) == len(caught["fresh"]) == 1 and orphans[0]["state_type"] == "RUNNING", orphans
    judge = [r for r in seen["task_runs"] if r["name"].startswith("judge ")]
    assert len(judge) == expected and {r["state_type"] for r in judge} == {"COMPLETED"}, judge
    assert sorted(r["run_count"] for r in judge) == [1] * (expected - 1) + [2], judge
    flows = seen["flow_runs"]
    assert flows and {r["state_type"] for r in flows} == {"COMPLETED"}, flows

    # The GPU host's profiling service: each judgement scored once; the interrupted one is `lost`, not re-run.
    with sqlite3.connect(f"file:{gpu.root / 'profiler' / 'tasks.sqlite3'}?mode=ro", uri=True) as db:
        states = dict(db.execute("SELECT state, count(*) FROM tasks GROUP BY state").fetchall())
        lost = [r[0] for r in db.execute("SELECT task_id FROM tasks WHERE state = 'lost'")]
    assert states == {"completed": expected, "lost": 1}, states
    assert lost == caught["fresh"], (lost, caught)
    print(f"\ntwo hosts: {expected} turns, crash at +{t_crash - t0:.0f} s killed {len(killed)} processes, "
          f"{len(flows)} flow runs, total {time.monotonic() - t0:.0f} s")
