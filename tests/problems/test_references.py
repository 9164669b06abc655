"""Every problem's reference `run` (torch, CPU, tiny shapes) agrees with an independent float64 naive version.

The naive versions are written from the mathematical definitions with explicit loops or autograd, in
float64, so a wrong mask, scale, LSE base, index or gradient formula in a reference shows up here.
"""

from __future__ import annotations

import math

import pytest

torch = pytest.importorskip("torch")

from ptxcore.problems import get_problem  # noqa: E402

GEN = torch.Generator().manual_seed(1234)


def reference(name: str):
    ns: dict = {}
    src = get_problem(name).definition.reference
    exec(compile(src, f"<reference {name}>", "exec"), ns)  # noqa: S102 - our own catalog's reference code
    return ns["run"]


def randn(*shape, dtype=torch.float32):
    return torch.randn(*shape, generator=GEN, dtype=torch.float32).to(dtype)


def assert_close(out, expected, tol):
    assert out.shape == expected.shape
    assert torch.isfinite(out.double()).all()
    err = (out.double() - expected).abs().max().item()
    assert err <= tol, f"max abs error {err} > {tol}"


def naive_attention_f64(q, k, v, causal):
    """q,k,v [H,S,D] float64 -> O, natural-log LSE via explicit per-row softmax with autograd support."""
    scale = 1.0 / math.sqrt(q.shape[-1])
    s = torch.einsum("hqd,hkd->hqk", q, k) * scale
    if causal:
        n = q.shape[1]
        mask = torch.tensor([[j > i for j in range(n)] for i in range(n)])
        s = s.masked_fill(mask, float("-inf"))
    m = s.max(dim=-1, keepdim=True).values
    e = torch.exp(s - m)
    denom = e.sum(dim=-1, keepdim=True)
    return torch.einsum("hqk,hkd->hqd", e / denom, v), (m + torch.log(denom)).squeeze(-1)


def test_gemm_reference():
    run = reference("gemm_n7168_k5120")
    a, b = randn(5, 16), randn(7, 16)
    expected = torch.tensor([[sum(a[i, k].item() * b[j, k].item() for k in range(16)) for j in range(7)]
                             for i in range(5)], dtype=torch.float64)
    assert_close(run(a, b), expected, 1e-5)
    assert run(a.bfloat16(), b.bfloat16()).dtype == torch.bfloat16


@pytest.mark.parametrize("d", [64, 96, 128])
@pytest.mark.parametrize("causal", [False, True])
def test_attention_forward_reference(d, causal):
    name = f"mha_with_lse_d{d}{'_causal' if causal else ''}"
    run = reference(name)
    q, k, v = (randn(2, 3, 9, d) for _ in range(3))
    out, lse = run(q, k, v)
    for b in range(2):
        o64, l64 = naive_attention_f64(q[b].double(), k[b].double(), v[b].double(), causal)
        assert_close(out[b], o64, 1e-5)
        assert_close(lse[b], l64, 1e-5)
    # bf16 inputs: outputs keep the dtype and stay within the benchmark tolerance
    ob, lb = run(q.bfloat16(), k.bfloat16(), v.bfloat16())
    assert ob.dtype == torch.bfloat16 and lb.dtype == torch.float32 and lb.shape == (2, 3, 9)


@pytest.mark.parametrize("d", [64, 96, 128])
@pytest.mark.parametrize("causal", [False, True])
def test_attention_backward_reference(d, causal):
    run = reference(f"mha_bwd_d{d}{'_causal' if causal else ''}")
    q, k, v, do = (randn(2, 2, 7, d) for _ in range(4))
    grads, outs, lses = [], [], []
    for b in range(2):
        leaves = [t[b].double().requires_grad_(True) for t in (q, k, v)]
        o64, l64 = naive_attention_f64(*leaves, causal)
        o64.backward(do[b].double())
        grads.append([t.grad for t in leaves])
        outs.append(o64.detach())
        lses.append(l64.detach())
    o_in, l_in = torch.stack(outs).float(), torch.stack(lses).float()
    dq, dk, dv = run(q, k, v, o_in, do, l_in)
    for b in range(2):
        for got, want in zip((dq[b], dk[b], dv[b]), grads[b], strict=True):
            assert_close(got, want, 1e-4)


def naive_gqa_f64(q_rows, k_rows, v_rows, scale, causal):
    """Loops over heads and query rows; returns out [Lq,Hq,D] and base-2 lse [Lq,Hq]."""
    lq, hq, _ = q_rows.shape
    lk, hk, _ = k_rows.shape
    group = hq // hk
    out = torch.zeros(q_rows.shape, dtype=torch.float64)
    lse = torch.zeros(lq, hq, dtype=torch.float64)
    for h in range(hq):
        kh = h // group
        for i in range(lq):
            visible = [j for j in range(lk) if not causal or j <= i + (lk - lq)]
            logits = torch.stack([(q_rows[i, h] * k_rows[j, kh]).sum() * scale for j in visible])
            lse[i, h] = torch.logsumexp(logits, 0) / math.log(2.0)
            w = torch.softmax(logits, 0)
            out[i, h] = sum(w[n] * v_rows[j, kh] for n, j in enumerate(visible))
    return out, lse


def test_gqa_ragged_reference():
    run = reference("gqa_ragged_prefill_causal_h32_kv4_d128")
    q_lens, kv_lens = [3, 1, 4], [5, 1, 4]
    q, k, v = randn(8, 4, 16), randn(10, 2, 16), randn(10, 2, 16)
    qo = torch.tensor([0, 3, 4, 8], dtype=torch.int32)
    kvp = torch.tensor([0, 5, 6, 10], dtype=torch.int32)
    out, lse = run(q, k, v, qo, kvp, 0.25)
    for b in range(3):
        qs, ks = sum(q_lens[:b]), sum(kv_lens[:b])
        o64, l64 = naive_gqa_f64(q[qs:qs + q_lens[b]].double(), k[ks:ks + kv_lens[b]].double(),
                                 v[ks:ks + kv_lens[b]].double(), 0.25, causal=True)
        assert_close(out[qs:qs + q_lens[b]], o64, 1e-5)
        assert_close(lse[qs:qs + q_lens[b]], l64, 1e-5)


def test_gqa_paged_prefill_reference_gathers_pages():
    run = reference("gqa_paged_prefill_causal_h24_kv8_d128_ps1")
    pages = torch.tensor([7, 2, 9, 4, 0], dtype=torch.int32)
    k_cache, v_cache = randn(11, 1, 2, 16), randn(11, 1, 2, 16)
    q = randn(3, 6, 16)
    out, lse = run(q, k_cache, v_cache, torch.tensor([0, 3], dtype=torch.int32),
                   torch.tensor([0, 5], dtype=torch.int32), pages, 0.3)
    k_rows = k_cache[pages.long(), 0].double()
    v_rows = v_cache[pages.long(), 0].double()
    o64, l64 = naive_gqa_f64(q.double(), k_rows, v_rows, 0.3, causal=True)
    assert_close(out, o64, 1e-5)
    assert_close(lse, l64, 1e-5)


def test_gqa_paged_decode_reference():
    run = reference("gqa_paged_decode_h24_kv8_d128_ps1")
    k_cache, v_cache = randn(12, 1, 2, 16), randn(12, 1, 2, 16)
    q = randn(2, 6, 16)
    indptr = torch.tensor([0, 3, 7], dtype=torch.int32)
    indices = torch.tensor([11, 0, 5, 3, 8, 1, 6], dtype=torch.int32)
    out, lse = run(q, k_cache, v_cache, indptr, indices, 0.2)
    for b in range(2):
        pages = indices[indptr[b]:indptr[b + 1]].long()
        o64, l64 = naive_gqa_f64(q[b:b + 1].double(), k_cache[pages, 0].double(), v_cache[pages, 0].double(),
                                 0.2, causal=False)
        assert_close(out[b:b + 1], o64, 1e-5)
        assert_close(lse[b:b + 1], l64, 1e-5)
