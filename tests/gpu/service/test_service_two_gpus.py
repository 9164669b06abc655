"""The service with one real-judge worker per GPU on a two-GPU host (marker gpu; needs two GPUs: run on
nvidia-h200-x2 with `SERVICE_TESTS=tests/gpu/service/test_service_two_gpus.py bash benchmarks/device/run.sh
service-pytest`, carry .carry/judge_whl and .whl):

- the adversarial controls, submitted concurrently from six clients as one mixed batch, are spread over
  both GPUs and get the verdicts the single-GPU judge gives (tests/gpu/test_controls.py pins them);
- an operator drain of one GPU in the middle of a batch moves its work to the other GPU: every task is
  completed exactly once (one scored attempt), the interrupted attempt is excluded and rerun, and the
  drained GPU scores nothing after the drain.

Verdict-focused: reduced iteration counts (as in test_controls.py); sanitizer and ncu on.
"""

from __future__ import annotations

import os
import subprocess
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from ptxcore.gpu.service import HealthThresholds, ServiceConfig
from ptxcore.gpu.service.client import ProfilerClient
from ptxcore.gpu.service.server import BackgroundServer

from ..test_controls import CONFIG, CONTROLS, CONTROLS_DIR, GEMM
from .conftest import wait_for

pytestmark = pytest.mark.gpu
ATTN = "mha_with_lse_d128_causal"


def _gpu_count() -> int:
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        return len([v for v in visible.split(",") if v.strip()])
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=index", "--format=csv,noheader"], capture_output=True,
                             text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return 0
    return len(out.stdout.split()) if out.returncode == 0 else 0


@pytest.fixture(scope="module")
def two_gpu_service(tmp_path_factory):
    if _gpu_count() < 2:
        pytest.skip("needs two GPUs (nvidia-h200-x2)")
    config = ServiceConfig(work_dir=tmp_path_factory.mktemp("svc2"), gpus=[0, 1], port=0, default_timeout_s=900,
                           runner_args={"judge_config": dict(CONFIG)},
                           health=HealthThresholds(recheck_s=2.0), idle_check_s=10.0)
    with BackgroundServer(config) as server:
        wait_for(lambda: server.service.health().status.value == "ok", 300, "both GPU workers ready")
        yield server


def _lane(svc, gpu: int):
    return next(g for g in svc.health().gpus if g.gpu == gpu)


def _scored(view) -> list[dict]:
    return [a for a in view.raw["attempts"] if a["disposition"] == "scored"]


def test_mixed_batch_from_six_clients_spreads_over_both_gpus_with_single_gpu_verdicts(two_gpu_service):
    # Every control once, and the three passing kinds (CUDA core, TMA, attention) twice more.
    extra = [c for c in CONTROLS if c[0] in ("01_gemm_cuda_core.cu", "02_gemm_tma.cu", "14_attention_correct.cu")]
    batch = list(CONTROLS) + extra * 2

    def via_service(item):
        name, problem, _, _ = item
        with ProfilerClient(two_gpu_service.url, timeout_s=1800) as client:
            return client.wait(client.submit((CONTROLS_DIR / name).read_text(), problem, client_tag=name))

    t0 = time.monotonic()
    with ThreadPoolExecutor(6) as pool:
        views = list(pool.map(via_service, batch))
    wall = time.monotonic() - t0
    per_gpu = Counter(v.gpu for v in views)
    print(f"\n{len(batch)} tasks from 6 clients in {wall:.1f} s; tasks per GPU: {dict(sorted(per_gpu.items()))}")
    print("control: gpu / verdict / target / expected")
    for (name, _, want, _), v in zip(batch, views, strict=True):
        r = v.result
        print(f"  {name}: gpu {v.gpu} / {r.status.value if r else v.state} / "
              f"{r.target_instruction.status.value if r and r.target_instruction else '-'} / {want.value}")
    assert all(v.state == "completed" for v in views), [(v.task_id, v.state, v.error) for v in views]
    assert set(per_gpu) == {0, 1} and min(per_gpu.values()) >= 3, per_gpu
    wrong = [(name, v.result.status.value, want.value) for (name, _, want, _), v in zip(batch, views, strict=True)
             if v.result.status is not want]
    assert not wrong, wrong
    wrong_target = [(name, v.result.target_instruction.status.value, t.value)
                    for (name, _, _, t), v in zip(batch, views, strict=True)
                    if t is not None and v.result.target_instruction.status is not t]
    assert not wrong_target, wrong_target
    assert all(len(_scored(v)) == 1 for v in views)


def test_draining_one_gpu_mid_batch_moves_its_work_without_losing_or_doubling_a_turn(two_gpu_service):
    svc = two_gpu_service.service
    sources = [("01_gemm_cuda_core.cu", GEMM), ("14_attention_correct.cu", ATTN)] * 5
    with ProfilerClient(two_gpu_service.url, timeout_s=1800) as client:
        before = {g.gpu: g.tasks_scored for g in svc.health().gpus}
        ids = client.submit_batch([{"definition": p, "source": (CONTROLS_DIR / n).read_text(),
                                    "client_tag": f"drain-{i}-{n}"} for i, (n, p) in enumerate(sources)])
        wait_for(lambda: _lane(svc, 1).current_task is not None, 300, "a task running on GPU 1")
        interrupted = _lane(svc, 1).current_task
        drained_at = time.time()
        r = httpx.post(f"{two_gpu_service.url}/gpus/1/drain", json={"reason": "two-GPU drain test"}, timeout=30)
        assert r.status_code == 200, r.text
        views = [client.wait(i) for i in ids]
    after = {g.gpu: g for g in svc.health().gpus}
    print(f"\ndrained GPU 1 at task {interrupted}; per task: gpu of the scored attempt, dispositions")
    for v in views:
        print(f"  {v.raw['client_tag']}: gpu {v.gpu} {[(a['gpu'], a['disposition']) for a in v.raw['attempts']]}")
    assert len(set(ids)) == len(sources) and all(v.state == "completed" for v in views)
    assert all(v.result.status.value == "PASSED" for v in views), [v.result.status for v in views]
    assert all(len(_scored(v)) == 1 for v in views), "each task scored exactly once"
    by_id = {v.task_id: v for v in views}
    first = by_id[interrupted].raw["attempts"]
    assert first[0]["gpu"] == 1 and first[0]["disposition"] == "excluded" and "drain" in first[0]["reason"]
    assert _scored(by_id[interrupted])[0]["gpu"] == 0
    late_on_1 = [v.task_id for v in views for a in _scored(v) if a["gpu"] == 1 and a["started_at"] > drained_at]
    assert not late_on_1, "a drained GPU scores nothing that started after the drain"
    scored_here = sum(after[g].tasks_scored - before[g] for g in (0, 1))
    assert scored_here == len(sources), (scored_here, len(sources))
    assert after[1].state.value == "drained" and after[1].tasks_excluded >= 1
    with httpx.Client(base_url=two_gpu_service.url, timeout=30,
                      headers={"Authorization": f"Bearer {two_gpu_service.token}"}) as http:  # a state change
        assert http.post("/gpus/1/resume").status_code == 200
    wait_for(lambda: _lane(svc, 1).state.value == "idle", 120, "GPU 1 back after the drain is lifted")
