"""The real runner where there is no GPU: it never produces a verdict, and the service does not
pretend to serve (the GPU it cannot read is drained)."""

from __future__ import annotations

import pytest

from ptxcore.gpu import NoGPUError, gpu_available
from ptxcore.gpu.service import ServiceConfig
from ptxcore.gpu.service.judge_runner import JudgeRunner
from ptxcore.gpu.service.models import TaskKind, WorkItem
from ptxcore.gpu.service.server import BackgroundServer

from .conftest import wait_for

pytestmark = pytest.mark.skipif(gpu_available(), reason="checks the no-GPU behaviour")


def test_engine_raises_instead_of_judging(tmp_path, monkeypatch):
    monkeypatch.setenv("PTXBENCH_CACHE_DIR", str(tmp_path / "cache"))
    runner = JudgeRunner(gpu=0, work_dir=tmp_path)
    reading = runner.health()
    assert reading.error and reading.temperature_c is None
    item = WorkItem(task_id="a" * 32, kind=TaskKind.EVALUATE, definition="gemm_n7168_k5120", arch="hopper",
                    source="__global__ void k() {}\n", source_sha256="0" * 64, timeout_s=60)
    for kind in TaskKind:
        with pytest.raises(NoGPUError):
            runner.run(item.model_copy(update={"kind": kind}), lambda phase: None)


def test_service_with_the_real_engine_reports_the_gpu_unusable(tmp_path, monkeypatch):
    monkeypatch.setenv("PTXBENCH_CACHE_DIR", str(tmp_path / "cache"))
    config = ServiceConfig(work_dir=tmp_path / "svc", gpus=[0], port=0)
    with BackgroundServer(config) as server:
        wait_for(lambda: server.service.health().gpus[0].state.value == "drained", 60, "GPU drained")
        health = server.service.health()
        assert health.status.value == "unavailable"
        assert health.gpus[0].condition.value == "unresponsive" and "nvidia-smi" in health.gpus[0].reasons[0]
