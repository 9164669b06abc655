"""CPU replay of the generated solutions/mha_with_lse_d{64,96,128}*/fa3_wgmma_tma.cu through the hardware model.

Ported from the kernel: TMA coordinates of Q/K/V boxes, the K-major descriptors of Q and K (column half
and 32-byte K advance), the mask and online softmax on accumulator registers (quad shuffles), the packing
of P into wgmma A registers, the MN-major descriptor of V (LBO = half stride, 2048-byte K advance) and
the epilogue. The hardware model supplies TMA swizzling, descriptor reads and fragment layouts; at
D = 96 the second 64-column block is half TMA out-of-bounds fill, which PV multiplies as zeros.
"""

from __future__ import annotations

import numpy as np
import pytest

from research.kernel_models.attention_reference import attention_fwd, ptxbench_mismatch
from research.kernel_models.hw_model import Smem, a_regs_to_matrix, bf16, read_operand, tma_load, wgmma
from research.kernel_models.kernel_ports import desc_kmajor, desc_mnmajor, quad_max, quad_sum
from research.kernel_models.kernel_source import kernel_constants, solution_path

LN2 = 0.69314718055994531


def consumer(smem, C, cw, q0, S, n_tiles, causal, out, lse, bh, fill):
    t = np.arange(128)
    warp, lane = t // 32, t % 32
    row_in_tile = cw * 64 + warp * 16 + lane // 4
    q_row = [q0 + row_in_tile, q0 + row_in_tile + 8]
    warp_q_min = q0 + cw * 64 + warp * 16
    DP = C["DP"]
    o = np.zeros((128, DP // 2), np.float32)
    m_row = [np.full(128, -np.inf), np.full(128, -np.inf)]
    l_row = [np.zeros(128), np.zeros(128)]
    scale_log2 = 1.4426950408889634 / np.sqrt(C["D"])
    half, tile = C["HALF_BYTES"], C["TILE_BYTES"]
    for j in range(n_tiles):
        s = j % C["STAGES"]
        n0 = j * C["BN"]
        fill(j, s)  # the K / V full barriers guarantee tile j is in stage s here
        sc = np.zeros((128, 64), np.float32)
        for ks in range(C["D"] // 16):
            hoff, koff = (ks // 4) * half, (ks % 4) * 32
            a = read_operand(smem, desc_kmajor(C["OFF_Q"] + hoff + cw * 64 * 128 + koff), 64, k_major=True)
            b = read_operand(smem, desc_kmajor(C["OFF_K"] + s * tile + hoff + koff), 128, k_major=True)
            sc = wgmma(sc, a, b, scale_d=ks > 0)
        need_mask = (n0 + C["BN"] > S) | (causal & (n0 + C["BN"] - 1 > warp_q_min))
        i = np.arange(64)[None, :]
        key = n0 + 8 * (i // 4) + 2 * (lane[:, None] % 4) + (i & 1)
        q = np.where(((i // 2) & 1) == 1, q_row[1][:, None], q_row[0][:, None])
        masked = need_mask[:, None] & ((key >= S) | (causal & (key > q)))
        sc = np.where(masked, -np.inf, sc * scale_log2)
        for r in range(2):
            cols = [4 * c + 2 * r + e for c in range(16) for e in range(2)]
            ocols = [4 * c + 2 * r + e for c in range(DP // 8) for e in range(2)]
            mx = quad_max(sc[:, cols].max(axis=1))
            m_new = np.maximum(m_row[r], mx)
            m_use = np.where(m_new == -np.inf, 0.0, m_new)
            alpha = np.exp2(m_row[r] - m_use)
            m_row[r] = m_new
            sc[:, cols] = np.exp2(sc[:, cols] - m_use[:, None])
            o[:, ocols] *= alpha[:, None]
            l_row[r] = l_row[r] * alpha + sc[:, cols].sum(axis=1)
        for kk in range(8):
            pa = bf16(sc[:, 8 * kk : 8 * kk + 8])  # pa[kk][0..3] = pairs (8kk+0,1), (2,3), (4,5), (6,7)
            b = read_operand(smem, desc_mnmajor(C["OFF_V"] + s * tile + kk * 2048, half), DP, k_major=False)
            o = wgmma(o, a_regs_to_matrix(pa), b, scale_d=True)
    for r in range(2):
        ltot = quad_sum(l_row[r])
        inv = 1.0 / ltot
        for th in range(128):
            qq = q_row[r][th]
            if qq < S:
                for c in range(C["D"] // 8):
                    col = 8 * c + 2 * (lane[th] % 4)
                    out[bh, qq, col : col + 2] = o[th, [4 * c + 2 * r, 4 * c + 2 * r + 1]] * inv[th]
                if lane[th] % 4 == 0:
                    lse[bh, qq] = (m_row[r][th] + np.log2(ltot[th])) * LN2


def run_model(Q, K, V, causal: bool, name: str):
    """The kernel of problem `name` on Q, K, V [BH, S, D] (constants read from its generated file)."""
    C = kernel_constants(solution_path(name, "fa3_wgmma_tma.cu"))
    assert C["kCausal"] == causal
    BH, S, D = Q.shape
    assert D == C["D"]
    tile, half = C["TILE_BYTES"], C["HALF_BYTES"]
    out = np.full(Q.shape, np.nan, np.float32)
    lse = np.full((BH, S), np.nan, np.float32)
    grid_x = -(-S // C["BM"])
    current: dict[str, Smem] = {}
    for bh in range(BH):

        def fill(j, s, bh=bh):
            smem = current["smem"]
            for c0, off in ((64 * c, c * half) for c in range(C["NBLK"])):
                tma_load(smem, C["OFF_K"] + s * tile + off, K, (c0, j * C["BN"], bh), (64, 128, 1))
                tma_load(smem, C["OFF_V"] + s * tile + off, V, (c0, j * C["BN"], bh), (64, 128, 1))

        for bx in range(grid_x):
            q_block = grid_x - 1 - bx if causal else bx
            q0 = q_block * C["BM"]
            kv_end = min(S, q0 + C["BM"]) if causal else S
            n_tiles = -(-kv_end // C["BN"])
            smem = current["smem"] = Smem(C["OFF_BAR"])
            for c in range(C["NBLK"]):
                tma_load(smem, C["OFF_Q"] + c * half, Q, (64 * c, q0, bh), (64, 128, 1))
            for cw in range(2):
                consumer(smem, C, cw, q0, S, n_tiles, causal, out, lse, bh, fill)
    return out, lse


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize(("S", "D"), [(256, 128), (200, 128), (200, 64), (200, 96)])
def test_fa3_model_matches_reference(S, D, causal):
    name = f"mha_with_lse_d{D}_causal" if causal else f"mha_with_lse_d{D}"
    rng = np.random.default_rng(11)
    Q, K, V = (bf16(rng.standard_normal((2, S, D)).astype(np.float32)) for _ in range(3))
    out, lse = run_model(Q, K, V, causal, name)
    want_o, want_lse = attention_fwd(Q, K, V, causal)
    assert not np.isnan(out).any() and not np.isnan(lse).any(), "an output was never written"
    assert ptxbench_mismatch(bf16(out), want_o) == 0
    np.testing.assert_allclose(lse, want_lse, rtol=1e-4, atol=1e-4)


def test_mnmajor_descriptor_reads_v_columns():
    """The V operand of k-step kk is V[16 kk : 16 kk + 16, :] transposed to [D x 16] (N x K)."""
    C = kernel_constants(solution_path("mha_with_lse_d128", "fa3_wgmma_tma.cu"))
    rng = np.random.default_rng(5)
    V = bf16(rng.standard_normal((1, 128, 128)).astype(np.float32))
    smem = Smem(C["OFF_BAR"])
    for c0, off in ((0, 0), (64, C["HALF_BYTES"])):
        tma_load(smem, C["OFF_V"] + off, V, (c0, 0, 0), (64, 128, 1))
    for kk in (0, 3, 7):
        b = read_operand(smem, desc_mnmajor(C["OFF_V"] + kk * 2048, C["HALF_BYTES"]), 128, k_major=False)
        np.testing.assert_array_equal(b, V[0, 16 * kk : 16 * kk + 16, :].T)
