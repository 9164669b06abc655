"""Small helpers of the kernels, ported once for every model test: wgmma matrix descriptors, quad shuffles.

The descriptor encoders are the kernels' make_desc for 128-byte-swizzled shared-memory tiles (start address,
leading and stride byte offsets in 16-byte units, swizzle mode in bits 62-63); the quad reductions are the two
__shfl_xor_sync steps (1, 2) the attention kernels use for their row max and row sum over 128 threads.
"""

from __future__ import annotations

import numpy as np


def desc_kmajor(addr: int) -> int:
    """A K-major operand's descriptor (LBO 16 bytes, SBO 1024 bytes: eight 128-byte rows)."""
    return ((addr & 0x3FFFF) >> 4) | (1 << 16) | ((1024 >> 4) << 32) | (1 << 62)


def desc_mnmajor(addr: int, half_bytes: int) -> int:
    """An MN-major operand's descriptor (LBO = the stride between the two 64-column halves)."""
    return ((addr & 0x3FFFF) >> 4) | ((half_bytes >> 4) << 16) | ((1024 >> 4) << 32) | (1 << 62)


def quad_max(v: np.ndarray) -> np.ndarray:
    """Two __shfl_xor_sync steps (1, 2) over 128 threads: lanes t ^ 1, t ^ 2 stay in the warp."""
    t = np.arange(128)
    v = np.maximum(v, v[t ^ 1])
    return np.maximum(v, v[t ^ 2])


def quad_sum(v: np.ndarray) -> np.ndarray:
    """The sum over the same quad of lanes."""
    t = np.arange(128)
    v = v + v[t ^ 1]
    return v + v[t ^ 2]
