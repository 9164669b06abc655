"""What a person sees in the Prefect UI and the MLflow UI after a small demo run, in headless Chromium.

Debian's Chromium (`apt-get install chromium`) driven by Playwright for Python (`executable_path=/usr/bin/chromium`;
Playwright's own browser download is never used). Servers: a long-lived `prefect server start` with its UI and
`mlflow server` on the campaign's sqlite store, both on free loopback ports. The campaign: the demo's replay model
on two problems, two turns (CPU machine: compiled turns are NOT_EVALUATED). Screenshots of every page go to
`<tmp>/screenshots/` (and to $PTXBENCH_SCREENSHOTS when set); the test prints where.
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

from .ui_checks import (
    Shots,
    check_headline_fits,
    check_mlflow_landing,
    check_mlflow_link,
    check_mlflow_recorded,
    check_mlflow_runs,
    check_prefect,
    check_prefect_recorded_and_resume,
)

pytestmark = [pytest.mark.slow, pytest.mark.browser, pytest.mark.timeout(2400)]  # the demo run: up to 1500 s

CHROMIUM = "/usr/bin/chromium"
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]
CLI = "from flows.cli.main import app; app()"
BIN = Path(sys.executable).parent
PROBLEMS = ["gemm_n7168_k5120", "mha_with_lse_d128"]
CAMPAIGN_ID = "uidemo"
RECORDED = Path(__file__).resolve().parents[2] / "campaigns" / "recorded" / "h200"
CAMPAIGN = f"""\
name: {CAMPAIGN_ID}
description: The demo on two problems, two turns (browser test).
models:
  - model: replay/demo
architectures: [hopper]
problems: [{", ".join(PROBLEMS)}]
prompt_variants: [hopper-pack]
trajectories: 1
turns: 2
recorded_verdicts: {RECORDED}
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


@pytest.fixture(scope="module")
def work(tmp_path_factory) -> Path:
    if not Path(CHROMIUM).exists():
        pytest.skip(f"{CHROMIUM} missing (apt-get install chromium)")
    return tmp_path_factory.mktemp("ui")


@pytest.fixture(scope="module")
def prefect_ui(work, repo_root):
    """`prefect server start` with its UI. The UI asks the API at PREFECT_UI_API_URL, which --port does not change."""
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    yield from (url for _ in _serve(
        [str(BIN / "prefect"), "server", "start", "--host", "127.0.0.1", "--port", str(port)],
        _env(PREFECT_HOME=str(work / "server-home"), PREFECT_SERVER_LOGGING_LEVEL="WARNING",
             PREFECT_UI_API_URL=f"{url}/api"),
        work / "prefect-server.log", f"{url}/api/health", repo_root))


@pytest.fixture(scope="module")
def demo_run(prefect_ui, work, repo_root, compile_cache_dir):
    """The small demo campaign against the long-lived server; returns the MLflow store URI."""
    cfg = work / f"{CAMPAIGN_ID}.yaml"
    cfg.write_text(CAMPAIGN)
    mlflow_uri = f"sqlite:///{work / 'mlruns' / 'mlflow.db'}"
    t0 = time.monotonic()
    out = subprocess.run([sys.executable, "-c", CLI, "campaign", "run", str(cfg), "--warehouse",
                          str(work / "wh.duckdb"), "--mlflow-uri", mlflow_uri],
                         cwd=repo_root, capture_output=True, text=True, timeout=1500,
                         env=_env(PREFECT_API_URL=f"{prefect_ui}/api", PREFECT_HOME=str(work / "client-home"),
                                  PTXBENCH_CACHE_DIR=str(compile_cache_dir)))
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    again = subprocess.run([sys.executable, "-c", CLI, "campaign", "run", str(cfg), "--warehouse",  # a resume
                            str(work / "wh.duckdb"), "--mlflow-uri", mlflow_uri],
                           cwd=repo_root, capture_output=True, text=True, timeout=1500,
                           env=_env(PREFECT_API_URL=f"{prefect_ui}/api", PREFECT_HOME=str(work / "client-home"),
                                    PTXBENCH_CACHE_DIR=str(compile_cache_dir)))
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
    print(f"\nbrowser: demo campaign and its resume {time.monotonic() - t0:.0f} s")
    return mlflow_uri


@pytest.fixture(scope="module")
def mlflow_ui(demo_run, work, repo_root):
    port = _free_port()
    yield from (f"http://127.0.0.1:{port}" for _ in _serve(
        [str(BIN / "mlflow"), "server", "--backend-store-uri", demo_run, "--host", "127.0.0.1", "--port", str(port),
         "--workers", "1"],
        _env(), work / "mlflow-server.log", f"http://127.0.0.1:{port}/health", repo_root))


@pytest.fixture(scope="module")
def shots(work):
    shots = Shots(work / "screenshots")
    yield shots
    kept = os.environ.get("PTXBENCH_SCREENSHOTS")
    if kept:
        shutil.copytree(shots.root, kept, dirs_exist_ok=True)
    print(f"\nbrowser: {len(shots.taken)} screenshots in {kept or shots.root}")


@pytest.fixture
def page(work):
    """A fresh Chromium profile per test (Debian's binary, the flags CI uses)."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        context = pw.chromium.launch_persistent_context(
            str(work / f"chromium-profile-{time.monotonic_ns()}"), executable_path=CHROMIUM, headless=True,
            args=FLAGS, viewport={"width": 1600, "height": 1000})
        context.set_default_timeout(WAIT_MS)
        try:
            yield context.new_page()
        finally:
            context.close()


def test_prefect_ui_shows_the_trajectories_and_the_headline(prefect_ui, demo_run, page, shots):
    t0 = time.monotonic()
    check_prefect(page, prefect_ui, CAMPAIGN_ID, PROBLEMS, shots)
    print(f"\nbrowser: Prefect UI checks {time.monotonic() - t0:.0f} s")


def test_mlflow_ui_shows_the_trajectory_runs_and_their_metrics(mlflow_ui, demo_run, page, shots):
    t0 = time.monotonic()
    check_mlflow_runs(page, mlflow_ui, demo_run, CAMPAIGN_ID, shots)
    print(f"\nbrowser: MLflow UI checks {time.monotonic() - t0:.0f} s")


def test_mlflow_experiment_opens_on_its_runs_in_the_model_training_view(mlflow_ui, demo_run, page, shots):
    check_mlflow_landing(page, mlflow_ui, demo_run, CAMPAIGN_ID, shots)


def test_prefect_shows_recorded_verdicts_and_names_the_resume(prefect_ui, demo_run, page, shots):
    check_prefect_recorded_and_resume(page, prefect_ui, CAMPAIGN_ID, shots)


def test_the_headline_artifact_shows_every_column_at_1400_px(prefect_ui, demo_run, page, shots):
    check_headline_fits(page, prefect_ui, CAMPAIGN_ID, shots, width=1400)


def test_the_printed_mlflow_link_opens_the_runs_in_a_fresh_browser(mlflow_ui, demo_run, page, shots):
    check_mlflow_link(page, mlflow_ui, demo_run, CAMPAIGN_ID, shots)


def test_mlflow_names_recorded_verdicts_and_run_names_are_not_cut(mlflow_ui, demo_run, page, shots):
    check_mlflow_recorded(page, mlflow_ui, demo_run, CAMPAIGN_ID, shots)
