"""A small executable model of the Hopper data-movement and tensor-core semantics our kernels rely on.

Everything here is written from the PTX ISA (cp.async.bulk.tensor with SWIZZLE_128B, the wgmma matrix
descriptor and canonical layouts, the wgmma and mma.m16n8k16 register fragments, ldmatrix), so that the
index maths of solutions/*.cu can be replayed on the CPU with numpy: the kernels' tile, descriptor and
fragment formulas are ported to Python in the model tests and must reproduce a plain numpy reference.
It checks our index maths against our reading of the ISA; it cannot check the reading itself (the GPU
run does that).

Shared memory is modelled as an array of bf16 values (float32 holding bf16-rounded numbers) indexed by
byte address // 2; uninitialised slots are NaN, so reading anything that was never written shows up.
"""

from __future__ import annotations

import numpy as np

# ----------------------------------------------------------------------------- numerics


def bf16(x: np.ndarray) -> np.ndarray:
    """Round float32 values to bfloat16 (round to nearest even), returned as float32."""
    a = np.ascontiguousarray(x, dtype=np.float32)
    bits = a.view(np.uint32).astype(np.uint64)
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
    out = rounded.astype(np.uint32).view(np.float32)
    return np.where(np.isnan(a), np.float32(np.nan), out)


# ----------------------------------------------------------------------------- shared memory


class Smem:
    """Byte-addressed shared memory holding bf16 elements (2-byte granules)."""

    def __init__(self, nbytes: int):
        self.mem = np.full(nbytes // 2, np.nan, dtype=np.float32)

    def write(self, byte_addr: np.ndarray, values: np.ndarray) -> None:
        addr = np.asarray(byte_addr)
        assert np.all(addr % 2 == 0)
        self.mem[addr // 2] = values

    def read(self, byte_addr: np.ndarray) -> np.ndarray:
        addr = np.asarray(byte_addr)
        assert np.all(addr % 2 == 0)
        return self.mem[addr // 2]


def swizzle128(addr: np.ndarray) -> np.ndarray:
    """The 128-byte swizzle: 16-byte chunk bits [4,7) XOR the 128-byte row bits [7,10) of the address."""
    addr = np.asarray(addr, dtype=np.int64)
    return addr ^ (((addr >> 7) & 7) << 4)


def tma_load(smem: Smem, dst: int, tensor: np.ndarray, coords: tuple[int, ...], box: tuple[int, ...]) -> None:
    """cp.async.bulk.tensor tile load with SWIZZLE_128B.

    `tensor` is indexed outermost-first (numpy order); `coords` and `box` are innermost-first (the
    tensor-map order). The box lands densely in shared memory (innermost dimension fastest), the
    innermost box extent must be 128 bytes, and out-of-bounds elements are filled with zeros.
    """
    assert dst % 1024 == 0, "SWIZZLE_128B destinations must be 1024-byte aligned"
    assert box[0] * 2 == 128, "inner box extent must be one 128-byte swizzle span"
    rank = len(box)
    shape_inner_first = tensor.shape[::-1]
    grids = np.meshgrid(*[np.arange(b) for b in box], indexing="ij")  # innermost first
    linear = np.zeros_like(grids[0])
    mult = 1
    for d in range(rank):
        linear = linear + grids[d] * mult
        mult *= box[d]
    gcoords = [grids[d] + coords[d] for d in range(rank)]
    inside = np.ones_like(grids[0], dtype=bool)
    for d in range(rank):
        inside &= (gcoords[d] >= 0) & (gcoords[d] < shape_inner_first[d])
    safe = [np.where(inside, gcoords[d], 0) for d in range(rank)]
    values = tensor[tuple(safe[::-1])]
    values = np.where(inside, values, 0.0).astype(np.float32)
    smem.write(swizzle128(dst + 2 * linear), values)


# ----------------------------------------------------------------------------- wgmma


def desc_fields(desc: int) -> dict:
    return {
        "start": (desc & 0x3FFF) << 4,
        "lbo": ((desc >> 16) & 0x3FFF) << 4,
        "sbo": ((desc >> 32) & 0x3FFF) << 4,
        "base_offset": (desc >> 49) & 0x7,
        "mode": (desc >> 62) & 0x3,
    }


def read_operand(smem: Smem, desc: int, mn: int, k_major: bool, k: int = 16) -> np.ndarray:
    """The [mn x k] bf16 operand a wgmma reads through a 128B-swizzle descriptor.

    Canonical layouts (PTX ISA, T = 8 bf16 per 16 bytes), in bytes from the start address:
      K-major : ((8, m), (T, 2k)) : ((8T, SBO), (1, T))     -> (r % 8) * 128 + (r // 8) * SBO + 2 c
      MN-major: ((T, 8, m), (8, k)) : ((1, T, LBO), (8T, SBO)) -> 2 (r % 64) + (r // 64) * LBO
                                                                  + (c % 8) * 128 + (c // 8) * SBO
    then the 128-byte swizzle of the resulting address (base offset 0: atoms 1024-byte aligned).
    """
    f = desc_fields(desc)
    assert f["mode"] == 1, "only the 128B swizzle mode is modelled"
    assert f["base_offset"] == 0
    r, c = np.meshgrid(np.arange(mn), np.arange(k), indexing="ij")
    if k_major:
        off = (r % 8) * 128 + (r // 8) * f["sbo"] + 2 * c
    else:
        off = 2 * (r % 64) + (r // 64) * f["lbo"] + (c % 8) * 128 + (c // 8) * f["sbo"]
    return smem.read(swizzle128(f["start"] + off))


def wgmma_acc_coords(n: int) -> tuple[np.ndarray, np.ndarray]:
    """(row, col) of accumulator register i of warpgroup thread t, arrays of shape [128, n // 2]."""
    t = np.arange(128)[:, None]
    i = np.arange(n // 2)[None, :]
    row = 16 * (t // 32) + (t % 32) // 4 + 8 * ((i // 2) % 2)
    col = 8 * (i // 4) + 2 * (t % 4) + (i % 2)
    return row, col


def wgmma_a_coords() -> tuple[np.ndarray, np.ndarray]:
    """(row, k) of A-fragment element e (register e // 2, half e % 2) of thread t: shape [128, 8]."""
    t = np.arange(128)[:, None]
    e = np.arange(8)[None, :]
    j, h = e // 2, e % 2
    row = 16 * (t // 32) + (t % 32) // 4 + 8 * (j % 2)
    k = 2 * (t % 4) + h + 8 * (j // 2)
    return row, k


def acc_to_matrix(acc: np.ndarray, n: int) -> np.ndarray:
    """Per-thread accumulators [128, n/2] -> the logical [64, n] matrix."""
    row, col = wgmma_acc_coords(n)
    out = np.full((64, n), np.nan, dtype=np.float32)
    out[row, col] = acc
    return out


def matrix_to_acc(mat: np.ndarray) -> np.ndarray:
    row, col = wgmma_acc_coords(mat.shape[1])
    return mat[row, col]


def wgmma(acc: np.ndarray, a: np.ndarray, b: np.ndarray, scale_d: bool) -> np.ndarray:
    """acc[128, n/2] = (acc if scale_d) + A[64 x 16] @ B[n x 16]^T, fp32."""
    n = b.shape[0]
    d = a.astype(np.float64) @ b.astype(np.float64).T
    prev = acc_to_matrix(acc, n) if scale_d else 0.0
    return matrix_to_acc((prev + d).astype(np.float32))


def a_regs_to_matrix(vals: np.ndarray) -> np.ndarray:
    """Per-thread A-fragment elements [128, 8] (register order a0..a7) -> the logical [64, 16] A."""
    row, k = wgmma_a_coords()
    out = np.full((64, 16), np.nan, dtype=np.float32)
    out[row, k] = vals
    return out


# ----------------------------------------------------------------------------- mma.sync and ldmatrix


def mma_a_coords() -> tuple[np.ndarray, np.ndarray]:
    """(row, k) of m16n8k16 A element e (register e // 2, half e % 2) of lane l: shape [32, 8]."""
    lane = np.arange(32)[:, None]
    e = np.arange(8)[None, :]
    j, h = e // 2, e % 2
    return lane // 4 + 8 * (j % 2), 2 * (lane % 4) + h + 8 * (j // 2)


def mma_b_coords() -> tuple[np.ndarray, np.ndarray]:
    """(k, n) of m16n8k16 B element e (register e // 2, half e % 2) of lane l: shape [32, 4]."""
    lane = np.arange(32)[:, None]
    e = np.arange(4)[None, :]
    j, h = e // 2, e % 2
    return 2 * (lane % 4) + h + 8 * j, lane // 4


def mma_c_coords() -> tuple[np.ndarray, np.ndarray]:
    """(row, col) of m16n8 accumulator register i of lane l: shape [32, 4]."""
    lane = np.arange(32)[:, None]
    i = np.arange(4)[None, :]
    return lane // 4 + 8 * (i // 2), 2 * (lane % 4) + (i % 2)


def mma(c: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """c[32,4] += A[16x16] B[16x8]; a: [32, 8] fragment elements, b: [32, 4] fragment elements."""
    am = np.full((16, 16), np.nan, dtype=np.float32)
    ar, ak = mma_a_coords()
    am[ar, ak] = a
    bm = np.full((16, 8), np.nan, dtype=np.float32)
    bk, bn = mma_b_coords()
    bm[bk, bn] = b
    cm = np.zeros((16, 8), dtype=np.float32)
    cr, cc = mma_c_coords()
    cm[cr, cc] = c
    out = cm + (am.astype(np.float64) @ bm.astype(np.float64)).astype(np.float32)
    return out[cr, cc]


def ldmatrix_x4(smem: Smem, lane_addr: np.ndarray, trans: bool) -> np.ndarray:
    """ldmatrix.m8n8.x4(.trans).b16: lane l gives the byte address of row l % 8 of matrix l // 8.

    Returns [32, 4, 2]: lane l, register i, half h. Without .trans a lane receives
    M_i[l // 4][2 (l % 4) + h]; with .trans it receives M_i[2 (l % 4) + h][l // 4].
    """
    lane_addr = np.asarray(lane_addr, dtype=np.int64)
    assert lane_addr.shape == (32,) and np.all(lane_addr % 16 == 0), "rows are 16-byte aligned"
    mats = np.empty((4, 8, 8), dtype=np.float32)
    for i in range(4):
        for r in range(8):
            mats[i, r] = smem.read(lane_addr[8 * i + r] + 2 * np.arange(8))
    lane = np.arange(32)
    out = np.empty((32, 4, 2), dtype=np.float32)
    for i in range(4):
        for h in range(2):
            if trans:
                out[:, i, h] = mats[i, 2 * (lane % 4) + h, lane // 4]
            else:
                out[:, i, h] = mats[i, lane // 4, 2 * (lane % 4) + h]
    return out
