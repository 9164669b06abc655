"""The fused CuPy comparison agrees with the CPU statement of the rule (with and without permutation)."""

from __future__ import annotations

import numpy as np
import pytest

from ptxcore.gpu.harness.compare import GpuComparator, compare_numpy

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("dtype", ["bfloat16", "float32", "float16"])
def test_gpu_matches_cpu(dtype):
    import torch

    g = torch.Generator(device="cuda").manual_seed(0)
    ref = torch.randn(64, 3, 257, device="cuda", generator=g).to(getattr(torch, dtype))
    out = (ref.float() + 0.02 * torch.randn(ref.shape, device="cuda", generator=g)).to(ref.dtype)
    out.view(-1)[5] = float("nan")
    out.view(-1)[7] = float("inf")
    perm = torch.randperm(64, device="cuda", generator=g)
    out_p = out.reshape(64, -1)[perm].reshape(out.shape).contiguous()  # out_p[j] = out[perm[j]]
    comp = GpuComparator(4)
    r0 = comp.compare(out.data_ptr(), ref.data_ptr(), out.numel(), dtype, 1e-2, 1e-2)
    r1 = comp.compare(out_p.data_ptr(), ref.data_ptr(), out.numel(), dtype, 1e-2, 1e-2, perm.data_ptr(),
                      out.numel() // 64)
    stats = comp.collect()
    cpu = compare_numpy(out.float().cpu().numpy(), ref.float().cpu().numpy(), 1e-2, 1e-2)
    for s in (stats[r0], stats[r1]):
        assert (s.mismatched, s.nan_count, s.inf_count, s.allclose_violations) == (
            cpu.mismatched, cpu.nan_count, cpu.inf_count, cpu.allclose_violations)
        assert s.max_abs_error == pytest.approx(cpu.max_abs_error, rel=1e-5)
        assert np.isclose(s.max_rel_error, cpu.max_rel_error, rtol=1e-4)
