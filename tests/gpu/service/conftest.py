"""Fixtures for the profiling-service tests: a service on 127.0.0.1 with FakeRunner workers (real
worker processes, simulated judge), and a way to set a fake GPU's health readings."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")

from ptxcore.gpu.service import HealthThresholds, ServiceConfig  # noqa: E402
from ptxcore.gpu.service.server import FAKE_RUNNER, BackgroundServer  # noqa: E402
from tests.waiting import wait_for  # noqa: E402, F401 - the service tests import it from here

GEMM = "gemm_n7168_k5120"
MHA = "mha_with_lse_d128"


def fake_config(work_dir: Path, gpus=(0, 1), **overrides) -> ServiceConfig:
    runner_args = {"eval_s": 0.05, "state_build_s": 0.1, "control_dir": str(work_dir / "control")}
    runner_args.update(overrides.pop("runner_args", {}))
    health = HealthThresholds(recheck_s=0.2, healthy_checks_to_resume=2, check_timeout_s=5.0)
    base = dict(work_dir=work_dir, gpus=list(gpus), port=0, runner=FAKE_RUNNER, runner_args=runner_args,
                default_timeout_s=4.0, health=health, idle_check_s=0.5, shutdown_grace_s=5.0,
                worker_start_timeout_s=60.0)
    base.update(overrides)
    (work_dir / "control").mkdir(parents=True, exist_ok=True)
    return ServiceConfig(**base)


def set_gpu(config: ServiceConfig, gpu: int, **reading) -> None:
    """What FakeRunner's health() reports for `gpu` from now on (empty: defaults)."""
    path = Path(config.runner_args["control_dir"]) / f"gpu{gpu}.json"
    path.write_text(json.dumps(reading))


class Running:
    """A started service and an HTTP client for it."""

    def __init__(self, server: BackgroundServer, config: ServiceConfig) -> None:
        self.server, self.config, self.url = server, config, server.url
        headers = {"Authorization": f"Bearer {server.token}"}  # the shared token, or this start's
        self.http = httpx.Client(base_url=server.url, headers=headers, timeout=60)

    @property
    def service(self):
        return self.server.service

    def submit(self, source: str, definition: str = GEMM, kind: str = "evaluate", **extra) -> str:
        r = self.http.post(f"/{kind}", json={"definition": definition, "source": source, **extra})
        assert r.status_code == 202, r.text
        return r.json()["task_id"]

    def result(self, task_id: str, wait_s: float = 30.0) -> dict:
        r = self.http.get(f"/tasks/{task_id}", params={"wait_s": wait_s}, timeout=wait_s + 30)
        assert r.status_code == 200, r.text
        return r.json()

    def health(self) -> dict:
        return self.http.get("/health").json()

    def gpu(self, index: int) -> dict:
        return next(g for g in self.health()["gpus"] if g["gpu"] == index)

    def ready(self) -> None:
        wait_for(lambda: self.health()["status"] == "ok", 60, "all GPUs ready")


@pytest.fixture
def start_service(tmp_path: Path) -> Iterator[Callable[..., Running]]:
    """start_service(gpus=(0, 1), **config overrides) -> Running (stopped at teardown)."""
    started: list[tuple[BackgroundServer, Running]] = []

    def start(gpus=(0, 1), work_dir: Path | None = None, **overrides) -> Running:
        config = fake_config(work_dir or tmp_path / "svc", gpus, **overrides)
        server = BackgroundServer(config).__enter__()
        running = Running(server, config)
        started.append((server, running))
        running.ready()
        return running

    yield start
    for server, running in reversed(started):
        running.http.close()
        server.__exit__(None, None, None)
