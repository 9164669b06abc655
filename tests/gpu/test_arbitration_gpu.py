"""Arbitration on the judge's real workload state (needs the H200): mha_bwd_d64_causal's cuDNN references against
an exact stand-in kernel (the float64 recomputation rounded to bf16), over the full outputs of one trial.

What it pins: the disputed-element search over ~150 M elements per output runs chunked on the GPU, only the
disputed heads are recomputed, and an exact kernel is ruled KERNEL_EXACT where cuDNN is the inexact side (the
diagnosis of 2026-12-01e found 3 such dQ elements in head (1, 8) of trial 0); and, through the whole judge, our
kernel for mha_bwd_d64_causal (INCORRECT_NUMERICAL against cuDNN before) is PASSED with its arbitration record.
Set PTXBENCH_ARBITRATION_OUT=path.json to keep that envelope.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from ptxcore.problems import get_problem
from ptxcore.schema import ArbitrationOutcome, EvaluationStatus

pytestmark = pytest.mark.gpu


def test_cudnn_backward_references_are_arbitrated_against_float64():
    import torch

    from ptxcore.gpu.harness.state import WorkloadState
    from ptxcore.gpu.pipeline.arbitration import arbitrate, recompute
    from ptxcore.gpu.pipeline.slices import unit_for

    problem = get_problem("mha_bwd_d64_causal")
    state = WorkloadState.build(problem, None, 1)
    trial = state.trials[0]
    heads = torch.tensor([[1, 8, 0, 0]], device="cuda")
    unit = unit_for(problem, trial.inputs, {"dQ": heads}, 4)
    truth = recompute(problem, unit.inputs)
    kernel = {n: t.clone() for n, t in trial.references.items()}
    for name, full in kernel.items():
        full.view(4 * 48, -1)[unit.sel] = truth[name].reshape(len(unit.sel), -1).to(full.dtype)
    t0 = time.monotonic()
    a = arbitrate(problem, trial.inputs, kernel, trial.references, 1e-2, 1e-2, trial=0)
    took = time.monotonic() - t0
    print(a.model_dump_json(indent=1), f"\narbitration took {took:.2f} s")
    assert a.slices == ["B=1,H=8"]
    assert a.outcome is ArbitrationOutcome.KERNEL_EXACT and a.inexact == ["library"]
    assert took < 30.0


def test_our_mha_bwd_d64_causal_kernel_is_passed_by_arbitration(tmp_path):
    from ptxcore.arch import get_architecture
    from ptxcore.gpu import JudgeConfig
    from ptxcore.gpu.pipeline.judge import GpuJudge

    source = (Path(__file__).resolve().parents[2] / "solutions" / "mha_bwd_d64_causal" / "wgmma_tma_ws.cu").read_text()
    judge = GpuJudge(JudgeConfig(cache_dir=tmp_path, trials=3, warmup=1, iters=3, throttle_retries=0))
    r = judge.judge(source, get_problem("mha_bwd_d64_causal"), get_architecture("hopper"))
    if os.environ.get("PTXBENCH_ARBITRATION_OUT"):
        Path(os.environ["PTXBENCH_ARBITRATION_OUT"]).write_text(r.model_dump_json(indent=1))
    arbs = r.correctness.arbitrations if r.correctness else []
    print(f"\n{r.status.value}: {r.reason[:300]}\n" + "\n".join(a.model_dump_json() for a in arbs)[:3000])
    assert r.status is EvaluationStatus.PASSED, r.reason
    assert arbs and all(a.outcome is ArbitrationOutcome.KERNEL_EXACT and a.reference_corrected for a in arbs)
    assert r.correctness.stats.timed_calls_passed == r.correctness.stats.timed_calls_verified == 9
