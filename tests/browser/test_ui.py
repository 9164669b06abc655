"""What a person sees in the Prefect UI and the MLflow UI after a small demo run, in headless Chromium.

Debian's Chromium (`apt-get install chromium`) driven by Playwright for Python (`executable_path=/usr/bin/chromium`;
Playwright's own browser download is never used). Servers: a long-lived `prefect server start` with its UI and
`mlflow server` on the campaign's sqlite store, both on free loopback ports. The campaign: the demo's replay model
on two problems, two turns (CPU machine: compiled turns are NOT_EVALUATED). Screenshots of every page go to
`<tmp>/screenshots/`; the test prints where.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

pytestmark = [pytest.mark.slow, pytest.mark.browser]

CHROMIUM = "/usr/bin/chromium"
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]
CLI = "from flows.cli.main import app; app()"
BIN = Path(sys.executable).parent
PROBLEMS = ["gemm_n7168_k5120", "mha_with_lse_d128"]
CAMPAIGN = f"""\
name: uidemo
description: The demo on two problems, two turns (browser test).
models:
  - model: replay/demo
architectures: [hopper]
problems: [{", ".join(PROBLEMS)}]
prompt_variants: [hopper-pack]
trajectories: 1
turns: 2
"""
WAIT_MS = 90_000  # a page of a UI on a loaded 2-core machine


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _env(**overrides: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PREFECT_", "PTXBENCH_", "MLFLOW_"))}
    return {**env, "PREFECT_SERVER_ANALYTICS_ENABLED": "false", "MLFLOW_ENABLE_TELEMETRY": "false",
            "DO_NOT_TRACK": "true", **overrides}


def _serve(args: list[str], env: dict[str, str], log: Path, health: str, cwd: Path) -> Iterator[subprocess.Popen]:
    with log.open("w") as out:
        proc = subprocess.Popen(args, env=env, cwd=cwd, stdout=out, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.monotonic() + 300
        while True:
            assert proc.poll() is None and time.monotonic() < deadline, log.read_text()[-3000:]
            try:
                if httpx.get(health, timeout=5).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            time.sleep(1)
        yield proc
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGINT)
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                pass
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait(30)


@pytest.fixture
def prefect_ui(tmp_path, repo_root):
    if not Path(CHROMIUM).exists():
        pytest.skip(f"{CHROMIUM} missing (apt-get install chromium)")
    port = _free_port()
    yield from (f"http://127.0.0.1:{port}" for _ in _serve(
        [str(BIN / "prefect"), "server", "start", "--host", "127.0.0.1", "--port", str(port)],
        _env(PREFECT_HOME=str(tmp_path / "server-home"), PREFECT_SERVER_LOGGING_LEVEL="WARNING"),
        tmp_path / "prefect-server.log", f"http://127.0.0.1:{port}/api/health", repo_root))


@pytest.fixture
def demo_run(prefect_ui, tmp_path, repo_root, compile_cache_dir):
    """The small demo campaign against the long-lived server; returns the MLflow store URI."""
    cfg = tmp_path / "uidemo.yaml"
    cfg.write_text(CAMPAIGN)
    mlflow_uri = f"sqlite:///{tmp_path / 'mlruns' / 'mlflow.db'}"
    out = subprocess.run([sys.executable, "-c", CLI, "campaign", "run", str(cfg), "--warehouse",
                          str(tmp_path / "wh.duckdb"), "--mlflow-uri", mlflow_uri],
                         cwd=repo_root, capture_output=True, text=True, timeout=1500,
                         env=_env(PREFECT_API_URL=f"{prefect_ui}/api", PREFECT_HOME=str(tmp_path / "client-home"),
                                  PTXBENCH_CACHE_DIR=str(compile_cache_dir)))
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    return mlflow_uri


@pytest.fixture
def mlflow_ui(demo_run, tmp_path, repo_root):
    port = _free_port()
    yield from (f"http://127.0.0.1:{port}" for _ in _serve(
        [str(BIN / "mlflow"), "server", "--backend-store-uri", demo_run, "--host", "127.0.0.1", "--port", str(port),
         "--workers", "1"],
        _env(), tmp_path / "mlflow-server.log", f"http://127.0.0.1:{port}/health", repo_root))


@pytest.fixture
def browser(tmp_path):
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        context = pw.chromium.launch_persistent_context(
            str(tmp_path / "chromium-profile"), executable_path=CHROMIUM, headless=True, args=FLAGS,
            viewport={"width": 1600, "height": 1000})
        context.set_default_timeout(WAIT_MS)
        try:
            yield context
        finally:
            context.close()


class Shots:
    def __init__(self, root: Path) -> None:
        self.root = root
        root.mkdir(parents=True, exist_ok=True)
        self.n = 0

    def take(self, page, name: str) -> Path:
        self.n += 1
        path = self.root / f"{self.n:02d}-{name}.png"
        page.screenshot(path=str(path), full_page=True)
        return path


def _prefect_runs(api: str) -> tuple[dict, list[dict]]:
    runs = httpx.post(f"{api}/flow_runs/filter", json={"limit": 200}, timeout=30).json()
    campaign = [r for r in runs if r["parent_task_run_id"] is None]
    assert len(campaign) == 1, [r["name"] for r in runs]
    return campaign[0], [r for r in runs if r["parent_task_run_id"] is not None]


def test_prefect_and_mlflow_uis_show_the_demo_run(prefect_ui, mlflow_ui, demo_run, browser, tmp_path):
    t0 = time.monotonic()
    shots = Shots(tmp_path / "screenshots")
    page = browser.new_page()
    campaign, trajectories = _prefect_runs(f"{prefect_ui}/api")
    assert sorted(p for p in PROBLEMS if any(p in r["name"] for r in trajectories)) == PROBLEMS

    # Prefect: the runs list names every trajectory; the campaign run shows its headline artifact.
    page.goto(f"{prefect_ui}/runs")
    for run in trajectories:
        page.get_by_text(run["name"], exact=False).first.wait_for()
    shots.take(page, "prefect-runs")
    page.goto(f"{prefect_ui}/runs/flow-run/{campaign['id']}")
    page.get_by_text(campaign["name"]).first.wait_for()
    shots.take(page, "prefect-campaign-run")
    page.get_by_role("tab", name="Artifacts").click()
    page.get_by_text("uidemo-headline").first.wait_for()
    shots.take(page, "prefect-campaign-artifacts")
    page.goto(f"{prefect_ui}/artifacts/key/uidemo-headline")
    page.get_by_text("Campaign uidemo: headline", exact=False).first.wait_for()
    for problem in PROBLEMS:
        page.get_by_text(problem).first.wait_for()
    shots.take(page, "prefect-headline-artifact")

    # MLflow: the experiment lists the campaign run and one child run per trajectory; a child shows its metrics.
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=demo_run)
    exp = client.get_experiment_by_name("ptxbench/uidemo")
    runs = client.search_runs([exp.experiment_id])
    children = [r for r in runs if r.data.tags.get("mlflow.parentRunId")]
    assert len(children) == len(PROBLEMS) and len(runs) == len(PROBLEMS) + 1
    page.goto(f"{mlflow_ui}/#/experiments/{exp.experiment_id}")
    page.get_by_text(exp.name).first.wait_for()
    shots.take(page, "mlflow-experiment")
    child = children[0]
    metrics = sorted(child.data.metrics)
    assert "compiled" in metrics, metrics
    page.goto(f"{mlflow_ui}/#/experiments/{exp.experiment_id}/runs/{child.info.run_id}")
    page.get_by_text(child.info.run_name).first.wait_for()
    for key in metrics:
        page.get_by_text(key, exact=True).first.wait_for()
    shots.take(page, "mlflow-trajectory-run")
    kept = Path(os.environ.get("PTXBENCH_SCREENSHOTS", tmp_path / "screenshots"))
    if kept != shots.root:
        shutil.copytree(shots.root, kept, dirs_exist_ok=True)
    print(f"\nbrowser: {shots.n} screenshots in {kept}; browser part {time.monotonic() - t0:.0f} s")
