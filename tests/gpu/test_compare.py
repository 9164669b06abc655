"""The comparison rule on CPU arrays: PTXBench's mismatch, NaN/Inf handling, strict allclose, permutation."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from ptxcore.gpu.harness.compare import KERNEL_SOURCE, CompareStats, compare_numpy, gather_reference


def test_mismatch_needs_both_abs_and_rel_over_tolerance():
    ref = np.array([100.0, 0.001, 1.0, 1.0], dtype=np.float32)
    out = np.array([100.5, 0.005, 1.005, 1.5], dtype=np.float32)
    s = compare_numpy(out, ref, atol=1e-2, rtol=1e-2)
    # 100.5: abs 0.5 > atol but rel 0.005 <= rtol -> match; 0.005: rel 4 but abs 0.004 <= atol -> match;
    # 1.005 within both; 1.5 exceeds both -> the only mismatch
    assert s.mismatched == 1
    assert s.max_abs_error == pytest.approx(0.5)
    assert s.max_rel_error == pytest.approx(4.0, rel=1e-3)
    assert s.matched_ratio == pytest.approx(0.75)
    assert not s.passes(1.0)
    assert s.passes(0.75)


def test_strict_allclose_is_stricter_than_the_ptxbench_rule():
    ref = np.array([100.0, 1.0], dtype=np.float32)
    out = np.array([100.5, 1.0], dtype=np.float32)  # |d| = 0.5 > atol + rtol*|ref| = 1.01? no: 0.5 <= 1.01
    assert compare_numpy(out, ref, 1e-2, 1e-2).allclose
    out = np.array([100.0, 1.02], dtype=np.float32)  # abs 0.02 > 0.02? 0.02 <= 0.01 + 0.01 -> borderline
    out2 = np.array([100.0, 1.03], dtype=np.float32)
    s = compare_numpy(out2, ref, 1e-2, 1e-2)
    assert not s.allclose and s.allclose_violations == 1
    assert s.mismatched == 1  # abs 0.03 > 0.01 and rel 0.03 > 0.01


def test_nan_always_mismatches_and_untouched_output_is_detected():
    ref = np.ones(8, dtype=np.float32)
    out = np.full(8, np.nan, dtype=np.float32)
    s = compare_numpy(out, ref, 1e-2, 1e-2)
    assert s.nan_count == 8 and s.mismatched == 8 and s.untouched
    assert not s.passes(0.0)  # NaN fails whatever the matched ratio
    out[0] = 1.0
    assert not compare_numpy(out, ref, 1e-2, 1e-2).untouched


def test_infinities_match_only_themselves():
    ref = np.array([-np.inf, 1.0, np.inf], dtype=np.float32)
    same = compare_numpy(ref.copy(), ref, 1e-2, 1e-2)
    assert same.mismatched == 0 and same.allclose and same.inf_count == 0
    out = np.array([-np.inf, np.inf, 0.0], dtype=np.float32)
    s = compare_numpy(out, ref, 1e-2, 1e-2)
    assert s.mismatched == 2 and s.inf_count == 1 and s.allclose_violations == 2
    assert math.isinf(s.max_abs_error)


def test_permuted_reference_is_read_through_the_permutation():
    rng = np.random.default_rng(0)
    ref = rng.standard_normal((4, 3, 5)).astype(np.float32)
    perm = np.array([2, 0, 3, 1])
    permuted = ref[perm]
    assert compare_numpy(permuted, ref, 1e-3, 1e-3, perm=perm, batch_dims=1).mismatched == 0
    assert compare_numpy(permuted, ref, 1e-3, 1e-3).mismatched > 0  # unpermuted reference disagrees
    ref2 = rng.standard_normal((2, 3, 4, 5)).astype(np.float32)  # (B, H) flattened as the batch
    perm2 = np.array([5, 4, 3, 2, 1, 0])
    out2 = ref2.reshape(6, -1)[perm2].reshape(ref2.shape)
    np.testing.assert_array_equal(gather_reference(ref2, perm2, 2), out2)
    assert compare_numpy(out2, ref2, 1e-3, 1e-3, perm=perm2, batch_dims=2).mismatched == 0


def test_bfloat16_rounding_passes_at_the_default_tolerance():
    torch.manual_seed(0)
    ref = torch.randn(4096, dtype=torch.float32)
    out = ref.to(torch.bfloat16).float()  # what a correct bf16 kernel returns
    s = compare_numpy(out.numpy(), ref.numpy(), 1e-2, 1e-2)
    assert s.passes(1.0) and s.max_rel_error <= 2 ** -8 + 1e-6


def test_merge_adds_counts_and_keeps_maxima():
    a = CompareStats(10, 1, 0, 0, 2, 0.5, 0.1)
    b = CompareStats(5, 0, 1, 1, 1, float("nan"), 0.3)
    m = a.merge(b)
    assert (m.numel, m.mismatched, m.nan_count, m.inf_count, m.allclose_violations) == (15, 1, 1, 1, 3)
    assert m.max_abs_error == 0.5 and m.max_rel_error == 0.3


def test_gpu_kernel_states_the_same_rule():
    # the CUDA source must encode the same thresholds as the CPU rule (reviewed; executed by test_compare_gpu)
    assert "(d > atol && rel > rtol)" in KERNEL_SOURCE and "!isfinite(f)" in KERNEL_SOURCE
    assert "1e-8f" in KERNEL_SOURCE and "isnan(o)" in KERNEL_SOURCE
