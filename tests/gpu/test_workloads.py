"""Resolved workload specs, seeded inputs (on CPU here) and GQA index structure."""

from __future__ import annotations

import pytest
import torch

from ptxcore.gpu.harness.workloads import call_args, generate_inputs, resolve_spec
from ptxcore.problems import get_problem


def test_gemm_spec_permutes_rows_of_a_and_c_only():
    p = get_problem("gemm_n7168_k5120")
    spec = resolve_spec(p, p.primary_workload)
    shapes = {t.name: (t.shape, t.batch_dims) for t in spec.tensors}
    assert shapes == {"A": ((8192, 5120), 1), "B": ((7168, 5120), 0), "C": ((8192, 7168), 1)}
    assert spec.batch_size == 8192 and [t.name for t in spec.outputs] == ["C"]


def test_attention_batch_is_batch_times_heads():
    p = get_problem("mha_bwd_d128_causal")
    spec = resolve_spec(p, p.primary_workload)
    assert spec.batch_size == 4 * 48
    assert {t.name: t.batch_dims for t in spec.tensors} == {n: 2 for n in ("Q", "K", "V", "O", "dO", "L", "dQ", "dK", "dV")}


def test_gqa_is_not_permuted_and_scalars_travel_by_value():
    p = get_problem("gqa_ragged_prefill_causal_h32_kv4_d128")
    spec = resolve_spec(p, p.primary_workload)
    assert spec.batch_size == 1 and all(t.batch_dims == 0 for t in spec.tensors)
    scale = [t for t in spec.tensors if t.name == "sm_scale"][0]
    assert scale.shape is None and scale.scalar == pytest.approx(0.0883883476)


def test_seeded_inputs_are_reproducible_and_differ_across_seeds():
    p = get_problem("gemm_n7168_k5120")
    spec = resolve_spec(p, p.primary_workload)
    a = generate_inputs(p, spec, seed=1, device="cpu")
    b = generate_inputs(p, spec, seed=1, device="cpu")
    c = generate_inputs(p, spec, seed=2, device="cpu")
    assert a["A"].dtype == torch.bfloat16 and a["A"].shape == (8192, 5120)
    assert torch.equal(a["A"], b["A"]) and not torch.equal(a["A"], c["A"])
    assert 0.9 < a["A"].float().std().item() < 1.1
    assert [t.name for t in spec.tensors] == ["A", "B", "C"] and len(call_args(spec, {**a, "C": 0})) == 3


@pytest.mark.parametrize("name", ["gqa_paged_decode_h24_kv8_d128_ps1", "gqa_paged_prefill_causal_h24_kv8_d128_ps1",
                                  "gqa_ragged_prefill_causal_h32_kv4_d128"])
def test_gqa_structure_is_valid(name):
    p = get_problem(name)
    spec = resolve_spec(p, p.primary_workload)
    axes = p.primary_workload.axes
    x = generate_inputs(p, spec, seed=p.extension.seed, device="cpu")
    kv_indptr = x["kv_indptr"]
    assert kv_indptr.dtype == torch.int32 and kv_indptr[0] == 0 and bool((kv_indptr[1:] >= kv_indptr[:-1]).all())
    assert kv_indptr.numel() == axes["len_indptr"]
    if "kv_indices" in x:
        idx = x["kv_indices"]
        assert idx.numel() == axes["num_kv_indices"] == int(kv_indptr[-1])
        assert idx.unique().numel() == idx.numel() and int(idx.max()) < axes["num_pages"]
    if "qo_indptr" in x:
        assert int(x["qo_indptr"][-1]) == axes["total_q"]
