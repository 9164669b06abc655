"""numpy references for the attention problems (same maths as the definitions' torch references)."""

from __future__ import annotations

import numpy as np


def attention_fwd(Q: np.ndarray, K: np.ndarray, V: np.ndarray, causal: bool) -> tuple[np.ndarray, np.ndarray]:
    """Q, K, V: [BH, S, D] float32. Returns O [BH, S, D] and the natural-log LSE [BH, S] (float64)."""
    d = Q.shape[-1]
    s = np.einsum("bid,bjd->bij", Q.astype(np.float64), K.astype(np.float64)) / np.sqrt(d)
    if causal:
        n = s.shape[-1]
        s = np.where(np.tril(np.ones((n, n), dtype=bool)), s, -np.inf)
    mx = s.max(-1, keepdims=True)
    lse = (mx + np.log(np.exp(s - mx).sum(-1, keepdims=True)))[..., 0]
    p = np.exp(s - lse[..., None])
    return np.einsum("bij,bjd->bid", p, V.astype(np.float64)), lse


def attention_bwd(Q, K, V, out, dO, L, causal: bool):
    """The definitions' backward from the saved LSE: returns dQ, dK, dV (float64)."""
    d = Q.shape[-1]
    scale = 1.0 / np.sqrt(d)
    q, k, v, o, do = (x.astype(np.float64) for x in (Q, K, V, out, dO))
    s = np.einsum("bid,bjd->bij", q, k) * scale
    if causal:
        n = s.shape[-1]
        s = np.where(np.tril(np.ones((n, n), dtype=bool)), s, -np.inf)
    p = np.exp(s - L.astype(np.float64)[..., None])
    dv = np.einsum("bij,bid->bjd", p, do)
    dp = np.einsum("bid,bjd->bij", do, v)
    delta = (do * o).sum(-1, keepdims=True)
    ds = p * (dp - delta)
    return np.einsum("bij,bjd->bid", ds, k) * scale, np.einsum("bij,bid->bjd", ds, q) * scale, dv


def ptxbench_mismatch(got: np.ndarray, want: np.ndarray, atol: float = 1e-2, rtol: float = 1e-2) -> int:
    """Elements failing PTXBench's rule: abs error > atol AND relative error > rtol."""
    err = np.abs(got.astype(np.float64) - want.astype(np.float64))
    rel = err / np.maximum(np.abs(want.astype(np.float64)), 1e-12)
    return int(np.count_nonzero((err > atol) & (rel > rtol)) + np.count_nonzero(np.isnan(got)))
