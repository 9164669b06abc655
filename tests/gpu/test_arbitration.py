"""Arbitrated correctness (issue 25), on small CPU tensors and the real definitions' reference code.

Rules stated here:
- where kernel and library disagree, the disputed slices are recomputed in float64 from the definition's own
  reference, and the paper's tolerance against float64 rules;
- an exact kernel is not failed by an inexact library (the mha_bwd_d64_causal case: 3 elements of cuDNN's dQ);
- a wrong kernel stays wrong (the control), a NaN is never exact, and an arbitration that cannot run leaves the
  library's verdict standing;
- only the disputed slices are recomputed.
"""

from __future__ import annotations

import math

import pytest

torch = pytest.importorskip("torch")

from ptxcore.gpu.pipeline.arbitration import Float64Mode, Limits, arbitrate, recompute  # noqa: E402
from ptxcore.problems import get_problem  # noqa: E402
from ptxcore.schema import ArbitrationOutcome, JudgeCorrectness  # noqa: E402

GEN = torch.Generator().manual_seed(25)
TOL = 1e-2


def randn(*shape):
    return torch.randn(*shape, generator=GEN, dtype=torch.float64)


def attention_f64(q, k, v, causal):
    """q, k, v [B, H, S, D] float64 -> O, natural-log LSE (naive softmax)."""
    s = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
    if causal:
        n = q.shape[2]
        s = s.masked_fill(torch.ones(n, n, dtype=torch.bool).triu(1), float("-inf"))
    lse = torch.logsumexp(s, dim=-1)
    return torch.exp(s - lse.unsqueeze(-1)) @ v, lse


def bwd_case(b=1, h=2, s=16, d=8):
    """mha_bwd inputs (bf16 / fp32 as the judge holds them) and float64 gradients by autograd."""
    q, k, v, do = (randn(b, h, s, d).bfloat16().double() for _ in range(4))  # the values the kernel gets
    leaves = [t.clone().requires_grad_() for t in (q, k, v)]
    o, lse = attention_f64(*leaves, causal=True)
    grads = torch.autograd.grad(o, leaves, do)
    inputs = {"Q": q.bfloat16(), "K": k.bfloat16(), "V": v.bfloat16(), "O": o.detach().bfloat16(),
              "dO": do.bfloat16(), "L": lse.detach().float()}
    return inputs, dict(zip(("dQ", "dK", "dV"), grads, strict=True))


def bf16(outputs):
    return {n: t.bfloat16() for n, t in outputs.items()}


def nudge(outputs, name, index, by=0.05):
    out = {n: t.clone() for n, t in outputs.items()}
    out[name][index] += by
    return out


BWD = get_problem("mha_bwd_d64_causal")


def test_the_reference_runs_in_float64():
    a, b = torch.randn(5, 64, generator=GEN), torch.randn(7, 64, generator=GEN)
    got = recompute(get_problem("gemm_n7168_k5120"), {"A": a.bfloat16(), "B": b.bfloat16()})["C"]
    exact = a.bfloat16().double() @ b.bfloat16().double().T
    assert got.dtype is torch.float64 and (got - exact).abs().max() < 1e-12
    with Float64Mode():
        assert torch.ones(2, dtype=torch.float32).dtype is torch.float64 and a.float().dtype is torch.float64


def test_an_exact_kernel_is_not_failed_by_an_inexact_library():
    """The mha_bwd_d64_causal case: cuDNN off at 3 elements of dQ, the kernel within tolerance of float64."""
    inputs, truth = bwd_case()
    kernel = bf16(truth)
    library = nudge(nudge(nudge(kernel, "dQ", (0, 1, 1, 3)), "dQ", (0, 1, 2, 5)), "dQ", (0, 1, 3, 0))
    a = arbitrate(BWD, inputs, kernel, library, TOL, TOL, trial=0)
    assert a.outcome is ArbitrationOutcome.KERNEL_EXACT and a.inexact == ["library"]
    assert a.slices == ["B=0,H=1"]  # only the disputed head was recomputed
    dq = next(o for o in a.outputs if o.output == "dQ")
    assert dq.disputed == 3 and dq.library_mismatches == 3 and dq.kernel_mismatches == 0
    assert dq.kernel_max_abs_error < TOL < dq.library_max_abs_error and dq.slice_kernel_mismatches == 0
    assert [e.index for e in a.elements] == [[0, 1, 1, 3], [0, 1, 2, 5], [0, 1, 3, 0]]
    assert JudgeCorrectness.model_validate_json(JudgeCorrectness(arbitrations=[a]).model_dump_json()).arbitrations == [a]


def test_control_a_wrong_kernel_stays_incorrect_after_arbitration():
    inputs, truth = bwd_case()
    library = bf16(truth)
    kernel = nudge(library, "dK", (0, 0, 4, 2))
    a = arbitrate(BWD, inputs, kernel, library, TOL, TOL)
    assert a.outcome is ArbitrationOutcome.KERNEL_INEXACT and a.inexact == ["kernel"]
    both = arbitrate(BWD, inputs, kernel, nudge(library, "dQ", (0, 0, 1, 1)), TOL, TOL)
    assert both.outcome is ArbitrationOutcome.KERNEL_INEXACT and both.inexact == ["library", "kernel"]


def test_a_kernel_wrong_elsewhere_in_the_disputed_slice_is_not_saved():
    """The ruling covers every element of the recomputed slices: agreeing with an inexact library somewhere (so
    that element is not disputed) does not hide being off float64 there."""
    inputs, truth = bwd_case()
    exact = bf16(truth)
    library = nudge(exact, "dQ", (0, 1, 2, 2))  # the dispute: the library is off, the kernel exact
    dv = truth["dV"][0, 1].abs()
    where = (0, 1, *divmod(int(dv.argmin()), dv.shape[1]))  # a small value: bf16 rounds it finely
    t = float(truth["dV"][where])
    library["dV"][where], kernel = t + 0.030, {n: x.clone() for n, x in exact.items()}
    kernel["dV"][where] = t + 0.035  # within tolerance of the library (not disputed), 0.035 off float64
    a = arbitrate(BWD, inputs, kernel, library, TOL, TOL)
    dv_rec = next(o for o in a.outputs if o.output == "dV")
    assert dv_rec.disputed == 0 and dv_rec.slice_kernel_mismatches == 1
    assert a.outcome is ArbitrationOutcome.KERNEL_INEXACT and a.inexact == ["library", "kernel"]


def test_nan_is_never_exact_and_limits_leave_the_verdict_standing():
    inputs, truth = bwd_case()
    library = bf16(truth)
    nan = {n: t.clone() for n, t in library.items()}
    nan["dQ"][0, 0, 0, 0] = float("nan")
    assert arbitrate(BWD, inputs, nan, library, TOL, TOL).outcome is ArbitrationOutcome.KERNEL_INEXACT
    many = nudge(nudge(nudge(library, "dQ", (0, 0, 1, 1)), "dQ", (0, 0, 2, 2)), "dQ", (0, 1, 3, 3))
    capped = arbitrate(BWD, inputs, library, many, TOL, TOL, limits=Limits(max_disputed=2))
    assert capped.outcome is ArbitrationOutcome.NOT_ARBITRATED and "more than 2" in capped.reason
    heads = arbitrate(BWD, inputs, library, many, TOL, TOL, limits=Limits(max_units=1))
    assert heads.outcome is ArbitrationOutcome.NOT_ARBITRATED and "2 attention heads" in heads.reason
    assert arbitrate(BWD, inputs, library, library, TOL, TOL).outcome is ArbitrationOutcome.NOT_ARBITRATED


def test_gemm_rows():
    a, b = torch.randn(6, 32, generator=GEN).bfloat16(), torch.randn(5, 32, generator=GEN).bfloat16()
    exact = {"C": (a.double() @ b.double().T).bfloat16()}
    library = nudge(nudge(exact, "C", (4, 1), by=0.5), "C", (2, 0), by=0.5)
    r = arbitrate(get_problem("gemm_n7168_k5120"), {"A": a, "B": b}, exact, library, TOL, TOL)
    assert r.outcome is ArbitrationOutcome.KERNEL_EXACT and r.slices == ["rows 2, 4 of C"]
    wrong = arbitrate(get_problem("gemm_n7168_k5120"), {"A": a, "B": b}, library, exact, TOL, TOL)
    assert wrong.outcome is ArbitrationOutcome.KERNEL_INEXACT


def test_mha_forward_lse():
    q, k, v = (randn(1, 3, 8, 16).bfloat16().double() for _ in range(3))
    o, lse = attention_f64(q, k, v, causal=True)
    exact = {"O": o.bfloat16(), "LSE": lse.float()}
    library = nudge(exact, "LSE", (0, 2, 5), by=0.1)
    inputs = {"Q": q.bfloat16(), "K": k.bfloat16(), "V": v.bfloat16()}
    r = arbitrate(get_problem("mha_with_lse_d128_causal"), inputs, exact, library, TOL, TOL)
    assert r.outcome is ArbitrationOutcome.KERNEL_EXACT and r.slices == ["B=0,H=2"]


def gqa_f64(q, k, v, scale, causal):
    """One sequence: q [Lq, Hq, D], k/v [Lk, Hk, D] -> out [Lq, Hq, D], base-2 lse [Lq, Hq]."""
    g = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(g, 1), v.repeat_interleave(g, 1)
    s = torch.einsum("qhd,khd->hqk", q, k) * scale
    if causal:
        lq, lk = q.shape[0], k.shape[0]
        s = s.masked_fill(torch.arange(lk)[None, :] > torch.arange(lq)[:, None] + (lk - lq), float("-inf"))
    lse = torch.logsumexp(s, -1)
    return torch.einsum("hqk,khd->qhd", torch.exp(s - lse[..., None]), v), (lse / math.log(2)).T


def test_gqa_ragged_recomputes_only_the_disputed_sequence():
    lens, hq, hk, d = [3, 5, 2], 32, 4, 128
    t = sum(lens)
    q, k, v = randn(t, hq, d).bfloat16(), randn(t, hk, d).bfloat16(), randn(t, hk, d).bfloat16()
    ind = torch.tensor([0, 3, 8, 10], dtype=torch.int32)
    outs = [gqa_f64(q[a:b].double(), k[a:b].double(), v[a:b].double(), 0.088, True) for a, b in ((0, 3), (3, 8), (8, 10))]
    exact = {"output": torch.cat([o for o, _ in outs]).bfloat16(), "lse": torch.cat([x for _, x in outs]).float()}
    library = nudge(exact, "output", (5, 7, 3), by=0.3)
    inputs = {"q": q, "k": k, "v": v, "qo_indptr": ind, "kv_indptr": ind, "sm_scale": 0.088}
    r = arbitrate(get_problem("gqa_ragged_prefill_causal_h32_kv4_d128"), inputs, exact, library, TOL, TOL)
    assert r.outcome is ArbitrationOutcome.KERNEL_EXACT and r.slices == ["sequence 1 (query rows 3..7)"]


def test_gqa_paged_decode_gathers_only_the_disputed_sequence_pages():
    hq, hk, d, pages = 24, 8, 128, 20  # sequences of 2, 4 and 3 pages
    kc, vc = randn(pages, 1, hk, d).bfloat16(), randn(pages, 1, hk, d).bfloat16()
    q = randn(3, hq, d).bfloat16()
    idx = torch.randperm(pages, generator=GEN)[:9].to(torch.int32)
    ptr = torch.tensor([0, 2, 6, 9], dtype=torch.int32)
    outs = []
    for b in range(3):
        p = idx[int(ptr[b]):int(ptr[b + 1])].long()
        outs.append(gqa_f64(q[b:b + 1].double(), kc[p, 0].double(), vc[p, 0].double(), 0.088, False))
    exact = {"output": torch.cat([o for o, _ in outs]).bfloat16(), "lse": torch.cat([x for _, x in outs]).float()}
    library = nudge(exact, "lse", (2, 11), by=0.2)
    inputs = {"q": q, "k_cache": kc, "v_cache": vc, "kv_indptr": ptr, "kv_indices": idx, "sm_scale": 0.088}
    r = arbitrate(get_problem("gqa_paged_decode_h24_kv8_d128_ps1"), inputs, exact, library, TOL, TOL)
    assert r.outcome is ArbitrationOutcome.KERNEL_EXACT and r.slices == ["sequence 2 (query rows 2..2)"]
    wrong = arbitrate(get_problem("gqa_paged_decode_h24_kv8_d128_ps1"), inputs, library, exact, TOL, TOL)
    assert wrong.outcome is ArbitrationOutcome.KERNEL_INEXACT
