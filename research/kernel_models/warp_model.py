"""Warp-level ports of the helpers shared by the mma.sync kernels (fa2_mma.cu files).

Each function mirrors the device helper of the same name: same address formulas, same fragment
packing. Lane-indexed values are numpy arrays over the 32 lanes; shared memory is hw_model.Smem with
tiles addressed in elements (byte address = 2 * element offset). The tile helpers depend on the head
dimension D (the kernels' constexpr), so they are methods of `Tiles(D)`.
"""

from __future__ import annotations

import numpy as np

from .hw_model import Smem, bf16, ldmatrix_x4, mma

LANES = np.arange(32)


def ldsm(smem: Smem, elem_addr: np.ndarray, trans: bool = False) -> np.ndarray:
    """ldmatrix x4 from per-lane element offsets: returns [32, 4 registers, 2 halves]."""
    return ldmatrix_x4(smem, 2 * np.asarray(elem_addr, dtype=np.int64), trans)


def b_frag(regs: np.ndarray, first: int) -> np.ndarray:
    """Registers (first, first + 1) of an ldmatrix result as an m16n8k16 B fragment [32, 4]."""
    return regs[:, first : first + 2, :].reshape(32, 4)


def pack_a(p: np.ndarray, kk: int) -> np.ndarray:
    """Port of the P -> A packing: accumulator blocks 2kk, 2kk+1 ([n][4] per lane) -> A elements [32, 8]."""
    return bf16(np.concatenate([p[:, 2 * kk, :], p[:, 2 * kk + 1, :]], axis=1))


def shfl_xor(v: np.ndarray, mask: int) -> np.ndarray:
    return v[LANES ^ mask]


class Tiles:
    """The D-dependent helpers of a fa2_mma.cu kernel with head dimension D."""

    def __init__(self, D: int):
        self.D = D
        self.LDS = D if D % 64 == 0 else D + 8  # constexpr LDS: swizzled rows, or rows padded by 16 bytes

    def swz(self, row, col):
        """Port of swz(): XOR-swizzled 16-byte chunks (D a multiple of 64), else padded rows."""
        row = np.asarray(row)
        col = np.asarray(col)
        if self.D % 64 == 0:
            return row * self.D + (((col >> 3) ^ (row & 7)) << 3) + (col & 7)
        return row * self.LDS + col

    def load_tile(self, smem: Smem, tile: int, head: np.ndarray, row0: int, rows: int) -> None:
        """Port of load_tile(): cp.async 16-byte chunks, rows past S zero-filled."""
        S, D = head.shape[0], self.D
        for c in range(rows * (D // 8)):
            r, ch = c // (D // 8), c % (D // 8)
            vals = head[row0 + r, ch * 8 : ch * 8 + 8] if row0 + r < S else np.zeros(8, np.float32)
            smem.write(2 * (tile + self.swz(r, ch * 8) + np.arange(8)), vals)

    def gemm_abt(self, smem: Smem, a_tile: int, b_tile: int, warp: int) -> np.ndarray:
        """Port of gemm_abt(): acc[lane, 8 blocks, 4] = A(rows 16w..) * B^T over D."""
        acc = np.zeros((32, 8, 4), np.float32)
        lane = LANES
        for ks in range(self.D // 16):
            af = ldsm(smem, a_tile + self.swz(warp * 16 + (lane % 16), ks * 16 + (lane // 16) * 8)).reshape(32, 8)
            for np_ in range(4):
                row = np_ * 16 + (lane % 8) + (lane // 16) * 8
                regs = ldsm(smem, b_tile + self.swz(row, ks * 16 + ((lane // 8) % 2) * 8))
                acc[:, 2 * np_] = mma(acc[:, 2 * np_], af, b_frag(regs, 0))
                acc[:, 2 * np_ + 1] = mma(acc[:, 2 * np_ + 1], af, b_frag(regs, 2))
        return acc

    def gemm_pb(self, smem: Smem, acc: np.ndarray, p: np.ndarray, b_tile: int) -> np.ndarray:
        """Port of gemm_pb(): acc[lane, D / 8 blocks, 4] += P (accumulator fragments) * tile b as [k][n]."""
        lane = LANES
        acc = acc.copy()
        for kk in range(4):
            pa = pack_a(p, kk)
            for dp in range(self.D // 16):
                row = kk * 16 + (lane % 8) + ((lane // 8) % 2) * 8
                regs = ldsm(smem, b_tile + self.swz(row, dp * 16 + (lane // 16) * 8), trans=True)
                acc[:, 2 * dp] = mma(acc[:, 2 * dp], pa, b_frag(regs, 0))
                acc[:, 2 * dp + 1] = mma(acc[:, 2 * dp + 1], pa, b_frag(regs, 2))
        return acc

    def store_rows(self, out: np.ndarray, acc: np.ndarray, row0: int, mul: float) -> None:
        """Port of store_rows(): rows row0 + g and row0 + g + 8, columns 8n + 2t (+1)."""
        S = out.shape[0]
        for lane in range(32):
            g, t = lane // 4, lane % 4
            for r in range(2):
                row = row0 + g + 8 * r
                if row >= S:
                    continue
                for n in range(self.D // 8):
                    out[row, 8 * n + 2 * t : 8 * n + 2 * t + 2] = acc[lane, n, 2 * r : 2 * r + 2] * mul
