"""Flow tests share one Prefect test server per session (per xdist worker: `-n auto`); it takes tens of seconds
to start on a 2-core machine."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

SCRIPTED = """\
name: {name}
models:
  - model: {model}
architectures: [hopper]
problems: {problems}
prompt_variants: [hopper-pack]
trajectories: {trajectories}
turns: {turns}
judge_retry_delay_s: 0
concurrency:
  trajectories: 2
  compile: 2
  gpu_slots: {{hopper: {slots}}}
"""


@pytest.fixture(scope="session")
def prefect_api() -> str:
    """A temporary Prefect server for the whole session (each xdist worker has its own); yields its API URL."""
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    # A task waiting for a tag slot polls after the server's Retry-After (up to 30 s by default).
    os.environ.setdefault("PREFECT_SERVER_TASKS_TAG_CONCURRENCY_SLOT_WAIT_SECONDS", "1")
    from prefect.settings import PREFECT_API_URL
    from prefect.testing.utilities import prefect_test_harness

    with prefect_test_harness(server_startup_timeout=240):
        yield PREFECT_API_URL.value()


@pytest.fixture(scope="session")
def mlruns(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("mlruns")


@pytest.fixture
def flow_env(prefect_api, compile_cache_dir, mlruns, monkeypatch, tmp_path):
    """Environment of an in-process campaign: session compile cache, session MLflow store, tmp warehouse."""
    monkeypatch.setenv("PTXBENCH_CACHE_DIR", str(compile_cache_dir))
    monkeypatch.delenv("PTXBENCH_JUDGE_PLUGIN", raising=False)
    return {"api": prefect_api, "mlflow_uri": f"sqlite:///{mlruns / 'mlflow.db'}", "tmp": tmp_path}


def write_config(path: Path, name: str, model: str = "replay/scripted", slots: int = 1, turns: int = 3,
                 trajectories: int = 1, problems: str = "[gemm_n7168_k5120, mha_with_lse_d128]") -> Path:
    path.write_text(SCRIPTED.format(name=name, model=model, slots=slots, turns=turns, trajectories=trajectories,
                                    problems=problems))
    return path
