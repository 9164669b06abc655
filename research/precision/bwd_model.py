"""Model of the dS rounding of the attention-backward kernels (solutions/mha_bwd_d128*/), in torch.

The kernels compute P = exp2(S scale log2e - L log2e), dP = dO V^T, Dlt = rowsum(dO * O) and
dS = P * (dP - Dlt) in fp32 and feed dS to the tensor cores as the A operand of dQ = dS K and
dK = dS^T Q. This module emulates that rounding (float32 products of bf16 values accumulated in
fp32, as the tensor cores do) next to a float64 computation from the same inputs:

  bf16        dS rounded once to bf16 (the kernels before the fix; FlashAttention's choice too)
  bf16_scaled dS * scale rounded to bf16 (scale applied before the rounding): the same precision as
              bf16, but rounding errors independent of it; the stand-in for a reference (cuDNN) that
              also rounds dS once, at a point of its own
  hilo        dS = hi + lo, hi = bf16(dS), lo = bf16(dS - hi), both multiplied into one fp32
              accumulator; the lo product is issued for a tile only when some |dS| of the tile
              reaches `tau` (the kernels' kDsSplitMin; tau = 0: always). A tile is `tile_rows` output
              rows x 64 summed rows: a warp (16) in fa2_mma.cu, a warpgroup (64) in wgmma_tma_ws.cu.

Everything works on slabs: the first `rows` rows of dQ need dS[:rows, :], the first `rows` rows of
dK need dS[:, :rows]. In causal attention those rows are where dS is large (few keys per query row;
large P for the first keys), i.e. where the rounding shows. Device-agnostic (CPU study here:
bwd_study.py; the judge's own inputs on a GPU: bwd_h200.py).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

D = 128
SCALE = 1.0 / math.sqrt(D)
LOG2E = 1.4426950408889634
COLS = 64  # summed rows per tile (keys for dQ, queries for dK) in both kernels
SCHEMES = ("bf16", "bf16_scaled", "hilo")


def bf16(x: torch.Tensor) -> torch.Tensor:
    """Round to bf16 (nearest even, as __floats2bfloat162_rn) and back to x's dtype."""
    return x.to(torch.bfloat16).to(x.dtype)


@dataclass(frozen=True)
class Heads:
    """A batch of heads: bf16-valued float32 Q, K, V, dO, out (the forward's O) [n, S, D]; LSE L [n, S]."""

    Q: torch.Tensor
    K: torch.Tensor
    V: torch.Tensor
    dO: torch.Tensor
    out: torch.Tensor
    L: torch.Tensor
    causal: bool = True

    @property
    def seq(self) -> int:
        return self.Q.shape[1]


@dataclass(frozen=True)
class Variant:
    """One rounding scheme as a kernel applies it."""

    scheme: str
    tile_rows: int = 16
    tau: float = 0.0


def make_heads(n: int, seq: int, gen: torch.Generator, causal: bool = True) -> Heads:
    """n random heads (the problem's N(0, 1) inputs); O (bf16) and L (fp32) from a float64 forward."""
    Q, K, V, dO = (bf16(torch.randn(n, seq, D, generator=gen)) for _ in range(4))
    s = _mask((Q.double() @ K.double().transpose(1, 2)) * SCALE, 0, 0, causal, float("-inf"))
    lse = torch.logsumexp(s, -1)
    out = bf16((torch.exp(s - lse[..., None]) @ V.double()).float())
    return Heads(Q, K, V, dO, out, lse.float(), causal)


def _mask(x: torch.Tensor, row0: int, col0: int, causal: bool, fill: float) -> torch.Tensor:
    """Causal mask of a [n, R, C] block whose first element is (query row0, key col0): key > query."""
    if not causal:
        return x
    q = torch.arange(row0, row0 + x.shape[1], device=x.device)[:, None]
    k = torch.arange(col0, col0 + x.shape[2], device=x.device)[None, :]
    return x.masked_fill(k > q, fill)


def _slab(h: Heads, rows: int | None, cols: int | None) -> tuple[slice, slice]:
    return slice(0, rows or h.seq), slice(0, cols or h.seq)


def kernel_ds(h: Heads, rows: int | None = None, cols: int | None = None) -> torch.Tensor:
    """fp32 dS of query rows [0, rows) x key columns [0, cols) as the kernels compute it."""
    qs, ks = _slab(h, rows, cols)
    scale_log2 = torch.tensor(SCALE * LOG2E, dtype=torch.float32, device=h.Q.device)
    l_log2 = h.L[:, qs, None] * torch.tensor(LOG2E, dtype=torch.float32, device=h.Q.device)
    p = torch.exp2((h.Q[:, qs] @ h.K[:, ks].transpose(1, 2)) * scale_log2 - l_log2)
    p = _mask(p, 0, 0, h.causal, 0.0)
    dlt = (h.dO[:, qs] * h.out[:, qs]).sum(-1, keepdim=True)
    return p * (h.dO[:, qs] @ h.V[:, ks].transpose(1, 2) - dlt)


def exact_ds(h: Heads, rows: int | None = None, cols: int | None = None) -> torch.Tensor:
    """float64 dS of the same block from the definition's formula (natural-log LSE)."""
    qs, ks = _slab(h, rows, cols)
    q, k, v, o, do = (x.double() for x in (h.Q[:, qs], h.K[:, ks], h.V[:, ks], h.out[:, qs], h.dO[:, qs]))
    s = _mask((q @ k.transpose(1, 2)) * SCALE, 0, 0, h.causal, float("-inf"))
    p = torch.exp(s - h.L[:, qs, None].double())
    return p * (do @ v.transpose(1, 2) - (do * o).sum(-1, keepdim=True))


def tile_flags(a: torch.Tensor, tile_rows: int, tau: float) -> torch.Tensor:
    """Per element of a [n, R, C]: whether its (tile_rows x 64) tile holds some |a| >= tau."""
    n, rows, cols = a.shape
    t = a.abs().reshape(n, rows // tile_rows, tile_rows, cols // COLS, COLS).amax((2, 4)) >= tau
    return t.repeat_interleave(tile_rows, 1).repeat_interleave(COLS, 2)


def product(a: torch.Tensor, b: torch.Tensor, v: Variant, out_bf16: bool = True) -> torch.Tensor:
    """(a @ b) * SCALE under a rounding variant (a = dS or dS^T in fp32, b = K or Q), bf16 or fp32."""
    if v.scheme == "bf16":
        acc = bf16(a) @ b * SCALE
    elif v.scheme == "bf16_scaled":
        acc = bf16(a * SCALE) @ b
    elif v.scheme == "hilo":
        hi = bf16(a)
        lo = bf16(a - hi)
        if v.tau > 0:
            lo = lo * tile_flags(a, v.tile_rows, v.tau)
        acc = (hi @ b + lo @ b) * SCALE
    else:
        raise ValueError(f"unknown scheme {v.scheme!r}")
    return bf16(acc) if out_bf16 else acc


def first_rows(h: Heads, rows: int, v: Variant, out_bf16: bool = True) -> tuple[torch.Tensor, torch.Tensor]:
    """(dQ, dK) rows [0, rows) under a variant: dQ from dS[:rows, :] K, dK from dS[:, :rows]^T Q."""
    dq = product(kernel_ds(h, rows=rows), h.K, v, out_bf16)
    dk = product(kernel_ds(h, cols=rows).transpose(1, 2).contiguous(), h.Q, v, out_bf16)
    return dq, dk


def exact_first_rows(h: Heads, rows: int) -> tuple[torch.Tensor, torch.Tensor]:
    """float64 (dQ, dK) rows [0, rows)."""
    dq = exact_ds(h, rows=rows) @ h.K.double() * SCALE
    dk = exact_ds(h, cols=rows).transpose(1, 2) @ h.Q.double() * SCALE
    return dq, dk


def rule_mismatch(
    got: torch.Tensor, want: torch.Tensor, atol: float = 1e-2, rtol: float = 1e-2
) -> torch.Tensor:
    """PTXBench's element rule against a reference: abs error > atol AND abs error / |ref| > rtol."""
    err = (got.double() - want.double()).abs()
    return (err > atol) & (err > rtol * want.double().abs())
