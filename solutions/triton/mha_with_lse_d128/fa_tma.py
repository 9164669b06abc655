# Attention forward with LSE: O = softmax(Q K^T / sqrt(D)) V (bf16) and LSE = natural-log logsumexp (fp32).
# Definition order: inputs (Q, K, V: [B, H, S, D]), outputs (O: [B, H, S, D], LSE: [B, H, S]).
# One program per (128-query block, batch * head); Q, K, V and O move through per-head device-side tensor
# descriptors (TMA), S = Q K^T and O += P V are tl.dot on bf16 tiles (wgmma with 8 warps); online softmax in
# base 2. Causal: key blocks strictly below the diagonal run unmasked, the diagonal block masked, and the
# heaviest query blocks are scheduled first. Fixed configuration, no autotuning.
import math

import torch
import triton
import triton.language as tl

CAUSAL = False
BLOCK_M, BLOCK_N, NUM_WARPS, NUM_STAGES = 128, 128, 8, 3
LOG2E = 1.4426950408889634


def _descriptor_scratch(size, alignment, stream):
    # Global memory for the tensor descriptors the kernel builds on the device.
    return torch.empty(size, device="cuda", dtype=torch.int8)


@triton.jit
def _attend(acc, l_i, m_i, q, k_desc, v_desc, offs_m, lo, hi, seq, qk_scale,
            BN: tl.constexpr, MASK_DIAG: tl.constexpr, MASK_TAIL: tl.constexpr):
    offs_n = tl.arange(0, BN)
    for start_n in tl.range(lo, hi, BN):
        k = k_desc.load([start_n, 0])
        s = tl.dot(q, k.T) * qk_scale
        if MASK_DIAG:
            s = tl.where(offs_m[:, None] >= (start_n + offs_n)[None, :], s, -float("inf"))
        if MASK_TAIL:
            s = tl.where((start_n + offs_n)[None, :] < seq, s, -float("inf"))
        m_new = tl.maximum(m_i, tl.max(s, 1))
        p = tl.math.exp2(s - m_new[:, None])
        alpha = tl.math.exp2(m_i - m_new)
        l_i = l_i * alpha + tl.sum(p, 1)
        v = v_desc.load([start_n, 0])
        acc = tl.dot(p.to(tl.bfloat16), v, acc * alpha[:, None])
        m_i = m_new
    return acc, l_i, m_i


@triton.jit
def attn_fwd_lse(q_ptr, k_ptr, v_ptr, o_ptr, lse_ptr, seq, qk_scale,
                 D: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr, IS_CAUSAL: tl.constexpr,
                 MASK_TAIL: tl.constexpr):
    if IS_CAUSAL:
        block_m = tl.num_programs(0) - 1 - tl.program_id(0)  # longest rows first
    else:
        block_m = tl.program_id(0)
    head = tl.program_id(1).to(tl.int64)
    base = head * seq * D
    q_desc = tl.make_tensor_descriptor(q_ptr + base, shape=[seq, D], strides=[D, 1], block_shape=[BM, D])
    k_desc = tl.make_tensor_descriptor(k_ptr + base, shape=[seq, D], strides=[D, 1], block_shape=[BN, D])
    v_desc = tl.make_tensor_descriptor(v_ptr + base, shape=[seq, D], strides=[D, 1], block_shape=[BN, D])
    o_desc = tl.make_tensor_descriptor(o_ptr + base, shape=[seq, D], strides=[D, 1], block_shape=[BM, D])
    start_m = block_m * BM
    offs_m = start_m + tl.arange(0, BM)
    m_i = tl.full([BM], -float("inf"), dtype=tl.float32)
    l_i = tl.zeros([BM], dtype=tl.float32)
    acc = tl.zeros([BM, D], dtype=tl.float32)
    q = q_desc.load([start_m, 0])
    if IS_CAUSAL:
        acc, l_i, m_i = _attend(acc, l_i, m_i, q, k_desc, v_desc, offs_m, 0, start_m, seq, qk_scale,
                                BN, False, False)
        hi = tl.minimum(start_m + BM, seq)
        acc, l_i, m_i = _attend(acc, l_i, m_i, q, k_desc, v_desc, offs_m, start_m, hi, seq, qk_scale,
                                BN, True, MASK_TAIL)
    else:
        acc, l_i, m_i = _attend(acc, l_i, m_i, q, k_desc, v_desc, offs_m, 0, seq, seq, qk_scale,
                                BN, False, MASK_TAIL)
    o_desc.store([start_m, 0], (acc / l_i[:, None]).to(tl.bfloat16))
    lse = (m_i + tl.math.log2(l_i)) * 0.6931471805599453  # base-2 units back to natural log
    tl.store(lse_ptr + head * seq + offs_m, lse, mask=offs_m < seq)


def run(Q, K, V, O, LSE):  # noqa: E741 - the definition's names
    """Writes O and LSE into the preallocated outputs; allocates nothing but the descriptor scratch."""
    batch, heads, seq, dim = Q.shape
    assert BLOCK_M == BLOCK_N, "the causal split assumes square blocks"
    triton.set_allocator(_descriptor_scratch)
    grid = (triton.cdiv(seq, BLOCK_M), batch * heads)
    with torch.cuda.device(Q.device):
        attn_fwd_lse[grid](Q, K, V, O, LSE, seq, LOG2E / math.sqrt(dim), D=dim, BM=BLOCK_M, BN=BLOCK_N,
                           IS_CAUSAL=CAUSAL, MASK_TAIL=seq % BLOCK_N != 0,
                           num_warps=NUM_WARPS, num_stages=NUM_STAGES)
