"""The service with the real judge on this host's GPU (marker gpu; run on the H200):

- adversarial controls submitted concurrently from several clients get the same verdicts as the judge
  gives directly (what `ptxbench eval` calls), and the workload state stays resident between them;
- killing the worker in the middle of a task yields a reported (excluded) attempt, a healthy
  replacement worker, and a verdict from the retry.
"""

from __future__ import annotations

import os
import signal
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from ptxcore.gpu.service import HealthThresholds, ServiceConfig
from ptxcore.gpu.service.client import ProfilerClient
from ptxcore.gpu.service.server import BackgroundServer

from .conftest import wait_for

pytestmark = pytest.mark.gpu
CONTROLS = Path(__file__).resolve().parents[2] / "fixtures" / "controls"
GEMM, MHA = "gemm_n7168_k5120", "mha_with_lse_d128"
# A subset covering every verdict kind the controls produce (the judge's own suite runs all fifteen).
SUBSET = [("01_gemm_cuda_core.cu", GEMM), ("05_gemm_wrong_layout.cu", GEMM), ("06_gemm_oob_write.cu", GEMM),
          ("07_hang.cu", GEMM), ("08_host_exit.cu", GEMM), ("10_pointer_cache.cu", GEMM),
          ("12_cublas_include.cu", GEMM), ("14_attention_correct.cu", MHA), ("15_attention_wrong_lse.cu", MHA)]


@pytest.fixture
def real_service(tmp_path):
    config = ServiceConfig(work_dir=tmp_path / "svc", gpus=[0], port=0, default_timeout_s=900,
                           health=HealthThresholds(recheck_s=2.0), idle_check_s=10.0)
    with BackgroundServer(config) as server:
        wait_for(lambda: server.service.health().status.value == "ok", 300, "GPU worker ready")
        yield server


def test_controls_concurrently_match_the_direct_judge(real_service):
    from ptxcore.arch import get_architecture
    from ptxcore.gpu import JudgeConfig, judge_candidate
    from ptxcore.problems import get_problem

    def via_service(item):
        name, problem = item
        with ProfilerClient(real_service.url, timeout_s=1800) as client:
            task_id = client.submit((CONTROLS / name).read_text(), problem, client_tag=name)
            return client.wait(task_id)

    with ThreadPoolExecutor(3) as pool:  # three clients at once
        views = list(pool.map(via_service, SUBSET))
    health = real_service.service.health()
    served = {name: v.result for (name, _), v in zip(SUBSET, views, strict=True)}
    direct = {name: judge_candidate((CONTROLS / name).read_text(), get_problem(problem), get_architecture("hopper"),
                                    JudgeConfig()) for name, problem in SUBSET}
    table = {name: (served[name].status.value, direct[name].status.value) for name, _ in SUBSET}
    print("\ncontrol: service verdict / direct verdict")
    for name, (a, b) in table.items():
        print(f"  {name}: {a} / {b}")
    assert all(v.state == "completed" for v in views), [(v.task_id, v.state, v.error) for v in views]
    assert all(a == b for a, b in table.values()), table
    assert served["01_gemm_cuda_core.cu"].status.value == "PASSED"
    gpu = health.gpus[0]
    assert gpu.health.temperature_c is not None and gpu.health.memory_total_bytes > 64 << 30
    assert any(k.startswith(GEMM) for k in gpu.health.resident), gpu.health.resident
    gemm_runs = [v.result.stage_seconds.get("workload_and_reference") for (n, p), v in zip(SUBSET, views, strict=True)
                 if p == GEMM and v.result.stage_seconds.get("workload_and_reference") is not None]
    print(f"GEMM workload+reference stage seconds, in completion order: {gemm_runs}")
    assert min(gemm_runs) < 0.25 * max(gemm_runs), "resident workload state must make later GEMM tasks cheap"
    with ProfilerClient(real_service.url, timeout_s=1800) as client:  # the single-stage endpoints
        oob = client.evaluate((CONTROLS / "06_gemm_oob_write.cu").read_text(), GEMM, kind="sanitize")
        clean = client.evaluate((CONTROLS / "01_gemm_cuda_core.cu").read_text(), GEMM, kind="sanitize")
        prof = client.evaluate((CONTROLS / "01_gemm_cuda_core.cu").read_text(), GEMM, kind="profile")
    assert oob.status.value == "RUNTIME_ERROR" and oob.sanitizer.errors > 0
    assert clean.status.value == "PASSED" and clean.sanitizer.errors == 0
    assert prof.target_instruction.status.value == "absent"  # CUDA-core GEMM: no target family in its SASS


def test_killing_the_worker_mid_task_reports_and_replaces_it(real_service):
    svc = real_service.service
    source = (CONTROLS / "01_gemm_cuda_core.cu").read_text()
    with ProfilerClient(real_service.url, timeout_s=1800) as client:
        task_id = client.submit(source, GEMM, client_tag="kill-me")
        wait_for(lambda: svc.health().gpus[0].current_task == task_id, 120, "task running")
        victim = svc.health().gpus[0].worker_pid  # the task is on the worker: a kill now is mid-task
        os.kill(victim, signal.SIGKILL)
        view = client.wait(task_id)
    assert view.state == "completed", view.error
    attempts = view.raw["attempts"]
    assert attempts[0]["disposition"] == "excluded" and "SIGKILL" in attempts[0]["reason"]
    assert attempts[-1]["disposition"] == "scored" and view.result.status.value == "PASSED"
    gpu = svc.health().gpus[0]
    assert gpu.restarts >= 1 and gpu.worker_pid not in (None, victim) and gpu.condition.value == "healthy"
