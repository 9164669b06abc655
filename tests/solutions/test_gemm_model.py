"""CPU replay of solutions/gemm_n7168_k5120/wgmma_tma_ws.cu's index maths through the hardware model.

The port keeps the kernel's formulas (raster, TMA coordinates, descriptor construction and K advance,
epilogue row/column); the hardware model decides where data lands and which registers hold what.
"""

from __future__ import annotations

import numpy as np
import pytest

from research.kernel_models.hw_model import Smem, bf16, read_operand, tma_load, wgmma
from research.kernel_models.kernel_source import kernel_constants, solution_path

KERNEL = solution_path("gemm_n7168_k5120", "wgmma_tma_ws.cu")
C = kernel_constants(KERNEL)


def make_desc_k128(addr: int) -> int:
    """Port of make_desc_k128."""
    return ((addr & 0x3FFFF) >> 4) | (1 << 16) | ((1024 >> 4) << 32) | (1 << 62)


def tile_of_block(bid: int, tiles_m: int, tiles_n: int) -> tuple[int, int]:
    """Port of the grouped raster at the top of the kernel."""
    group = C["GROUP_M"] * tiles_n
    first_m = (bid // group) * C["GROUP_M"]
    rows_in_group = min(tiles_m - first_m, C["GROUP_M"])
    return first_m + (bid % group) % rows_in_group, (bid % group) // rows_in_group


def run_model(A: np.ndarray, B: np.ndarray) -> np.ndarray:
    BM, BN, BK, STAGES = C["BM"], C["BN"], C["BK"], C["STAGES"]
    M, K = A.shape
    N = B.shape[0]
    tiles_m, tiles_n = -(-M // BM), -(-N // BN)
    out = np.full((M, N), np.nan, dtype=np.float32)
    for bid in range(tiles_m * tiles_n):
        tile_m, tile_n = tile_of_block(bid, tiles_m, tiles_n)
        m0, n0 = tile_m * BM, tile_n * BN
        smem = Smem(STAGES * C["STAGE_BYTES"])
        sA, sB = 0, STAGES * C["A_STAGE_BYTES"]
        acc = [np.zeros((128, 128), np.float32) for _ in range(2)]
        for kt in range(-(-K // BK)):
            s = kt % STAGES
            tma_load(smem, sA + s * C["A_STAGE_BYTES"], A, (kt * BK, m0), (BK, BM))
            tma_load(smem, sB + s * C["B_STAGE_BYTES"], B, (kt * BK, n0), (BK, BN))
            for cw in range(2):
                da = make_desc_k128(sA + s * C["A_STAGE_BYTES"] + cw * 64 * 128)
                db = make_desc_k128(sB + s * C["B_STAGE_BYTES"])
                for kk in range(BK // 16):
                    a = read_operand(smem, da + 2 * kk, 64, k_major=True)
                    b = read_operand(smem, db + 2 * kk, BN, k_major=True)
                    acc[cw] = wgmma(acc[cw], a, b, scale_d=True)
        for cw in range(2):
            for t in range(128):
                warp, lane = t // 32, t % 32
                row = m0 + cw * 64 + warp * 16 + lane // 4
                col_base = n0 + 2 * (lane % 4)
                for i in range(32):
                    col = col_base + 8 * i
                    if col < N:
                        if row < M:
                            out[row, col : col + 2] = acc[cw][t, 4 * i : 4 * i + 2]
                        if row + 8 < M:
                            out[row + 8, col : col + 2] = acc[cw][t, 4 * i + 2 : 4 * i + 4]
    return bf16(out)


def test_kernel_constants_fit_hopper():
    assert C["BK"] * 2 == 128, "a K slice must be one 128-byte swizzle row"
    assert C["SMEM_BYTES"] <= 227 * 1024
    assert C["kThreads"] == 3 * 128 and C["kConsumerWarps"] == 8
    # setmaxnreg budget: producer 40 + two consumer warpgroups at 232 within the 64 K register file.
    assert 128 * 40 + 256 * 232 <= 65536
    src = KERNEL.read_text()
    assert "setmaxnreg.dec.sync.aligned.u32 40" in src and "setmaxnreg.inc.sync.aligned.u32 232" in src


@pytest.mark.parametrize(("M", "N"), [(8192, 7168), (200, 300), (1000, 7168)])
def test_raster_is_a_bijection(M, N):
    tiles_m, tiles_n = -(-M // C["BM"]), -(-N // C["BN"])
    seen = {tile_of_block(b, tiles_m, tiles_n) for b in range(tiles_m * tiles_n)}
    assert seen == {(m, n) for m in range(tiles_m) for n in range(tiles_n)}


@pytest.mark.parametrize(("M", "N", "K"), [(256, 512, 192), (200, 264, 136)])
def test_wgmma_gemm_model_matches_numpy(M, N, K):
    rng = np.random.default_rng(7)
    A = bf16(rng.standard_normal((M, K)).astype(np.float32))
    B = bf16(rng.standard_normal((N, K)).astype(np.float32))
    got = run_model(A, B)
    want = bf16((A.astype(np.float64) @ B.astype(np.float64).T).astype(np.float32))
    assert not np.isnan(got).any(), "some output element was never written"
    np.testing.assert_allclose(got, want, rtol=1e-2, atol=1e-2)


def test_model_catches_a_wrong_k_advance():
    """The model is sensitive to the descriptor maths: advancing 32 units instead of 2 reads wrong data."""
    rng = np.random.default_rng(3)
    A = bf16(rng.standard_normal((128, 64)).astype(np.float32))
    B = bf16(rng.standard_normal((256, 64)).astype(np.float32))
    smem = Smem(C["STAGE_BYTES"])
    tma_load(smem, 0, A, (0, 0), (64, 128))
    tma_load(smem, C["A_STAGE_BYTES"], B, (0, 0), (64, 256))
    good = read_operand(smem, make_desc_k128(0) + 2 * 1, 64, k_major=True)
    bad = read_operand(smem, make_desc_k128(0) + 32 * 1, 64, k_major=True)
    np.testing.assert_array_equal(good, A[:64, 16:32])
    assert not np.array_equal(bad, A[:64, 16:32])
