"""CPU replay of the generated GQA kernels (solutions/gqa_*/wgmma_tma.cu) through the hardware model.

Ported from the kernel (solutions/templates/gqa_wgmma_tma.cu.in): the device-side work list
(find_work), the packed (token, group head) rows and the Q TMA box {64, G, TOK}, the zeroed tail rows,
the ragged K/V TMA boxes and the paged cp.async gather (SWIZZLE_128B pattern written by hand), the
bottom-right causal mask, the online softmax, the wgmma descriptors and the epilogue (base-2 LSE, empty
rows) and, for decode, the split-KV chunks with their merge kernel. The reference is a numpy copy of
the definitions' torch reference. The paged producer's
cp.async / wait_group / arrive protocol is checked under random interleavings as well.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from research.kernel_models.hw_model import Smem, a_regs_to_matrix, bf16, read_operand, tma_load, wgmma
from research.kernel_models.kernel_ports import desc_kmajor, desc_mnmajor, quad_max, quad_sum
from research.kernel_models.kernel_source import kernel_constants, solution_path
from research.kernel_models.pipeline_model import Barrier, Hazard, Wait, World, many_schedules

LOG2E = 1.4426950408889634
RAGGED = "gqa_ragged_prefill_causal_h32_kv4_d128"
PAGED = "gqa_paged_prefill_causal_h24_kv8_d128_ps1"
DECODE = "gqa_paged_decode_h24_kv8_d128_ps1"


def constants(problem: str) -> dict:
    return kernel_constants(solution_path(problem, "wgmma_tma.cu"))


# ----------------------------------------------------------------------------- reference


def attend(q, k, v, sm_scale, causal):
    """The definitions' _attend: q [Lq, Hq, D], k/v [Lk, Hk, D] -> out [Lq, Hq, D], lse [Lq, Hq] (base 2)."""
    group = q.shape[1] // k.shape[1]
    k = np.repeat(k.astype(np.float64), group, axis=1)
    v = np.repeat(v.astype(np.float64), group, axis=1)
    logits = np.einsum("qhd,khd->hqk", q.astype(np.float64), k) * sm_scale
    if causal:
        lq, lk = q.shape[0], k.shape[0]
        rows = np.arange(lq)[:, None] + (lk - lq)
        logits = np.where(np.arange(lk)[None, :] > rows, -np.inf, logits)
    mx = logits.max(-1, keepdims=True)
    lse = (mx + np.log(np.exp(logits - mx).sum(-1, keepdims=True)))[..., 0]
    p = np.exp(logits - lse[..., None])
    return np.einsum("hqk,khd->qhd", p, v), (lse / math.log(2.0)).T


def reference(q, k, v, qo_indptr, kv_indptr, kv_indices, sm_scale, causal):
    """Ragged (kv_indices None), paged prefill, or decode (qo_indptr None): output, lse as the definitions."""
    out = np.zeros(q.shape, np.float64)
    lse = np.full(q.shape[:2], -np.inf)
    for b in range(len(kv_indptr) - 1):
        qs, qe = (b, b + 1) if qo_indptr is None else (qo_indptr[b], qo_indptr[b + 1])
        ks, ke = kv_indptr[b], kv_indptr[b + 1]
        if qe == qs or ke == ks:
            continue
        rows = np.arange(ks, ke) if kv_indices is None else kv_indices[ks:ke]
        kk, vv = k.reshape(-1, *k.shape[-2:])[rows], v.reshape(-1, *v.shape[-2:])[rows]
        out[qs:qe], lse[qs:qe] = attend(q[qs:qe], kk, vv, sm_scale, causal)
    return out, lse


# ----------------------------------------------------------------------------- kernel port


def work_items_of(C, qo_indptr, kv_indptr, b):
    if C["kDecode"]:
        return max(1, -(-(kv_indptr[b + 1] - kv_indptr[b]) // C["kSplitKeys"]))
    return -(-(qo_indptr[b + 1] - qo_indptr[b]) // C["TOK"])


def find_work(C, bx, qo_indptr, kv_indptr, batch):
    """Port of find_work(): (q_start, q_len, q0, kv_start, kv_len, kv_begin, kv_stop, parts) or None."""
    first, dec = 0, C["kDecode"]
    for b in range(batch):
        items = work_items_of(C, qo_indptr, kv_indptr, b)
        if bx < first + items:
            i = bx - first
            q_start = b if dec else qo_indptr[b]
            q_len = 1 if dec else qo_indptr[b + 1] - q_start
            q0 = 0 if dec else ((items - 1 - i) if C["kCausal"] else i) * C["TOK"]
            kv_len = kv_indptr[b + 1] - kv_indptr[b]
            kv_begin = i * C["kSplitKeys"] if dec else 0
            kv_stop = min(kv_len, kv_begin + C["kSplitKeys"]) if dec else kv_len
            return q_start, q_len, q0, kv_indptr[b], kv_len, kv_begin, kv_stop, items if dec else 1
        first += items
    return None


def gather_row(smem, C, tile, src, row, valid, swizzle=True):
    """Port of gather_row(): 16-byte chunk c of key row `row` at block c / 8, XOR-swizzled by row % 8."""
    for c in range(C["D"] // 8):
        chunk = ((c % 8) ^ (row % 8)) if swizzle else c % 8
        dst = tile + (c // 8) * C["HALF_BYTES"] + row * 128 + (chunk << 4)
        vals = src[8 * c : 8 * c + 8] if valid else np.zeros(8, np.float32)
        smem.write(dst + 2 * np.arange(8), vals)


def fill_kv(smem, C, s, j, k, v, kvh, w, kv_indices, swizzle=True):
    """The producer's tile j into stage s: TMA boxes (ragged) or the cp.async gather (paged)."""
    tile, half = C["TILE_BYTES"], C["HALF_BYTES"]
    kv_start, kv_begin, kv_stop = w[3], w[5], w[6]
    if not C["kPaged"]:
        for c in range(2):
            for off, x in ((C["OFF_K"], k), (C["OFF_V"], v)):
                row = kv_start + kv_begin + j * C["BN"]
                tma_load(smem, off + s * tile + c * half, x, (64 * c, kvh, row), (64, 1, 128))
        return
    for t in range(C["kProducerThreads"]):
        key = kv_begin + j * C["BN"] + t
        valid = key < kv_stop
        page = kv_indices[kv_start + key] if valid else 0
        gather_row(smem, C, C["OFF_K"] + s * tile, k[page, 0, kvh], t, valid, swizzle)
        gather_row(smem, C, C["OFF_V"] + s * tile, v[page, 0, kvh], t, valid, swizzle)


def consumer(smem, C, cw, w, kvh, fill, n_tiles, out, lse, scale_log2, shift, bx, part):
    q_start, q_len, q0, _, _, kv_begin, kv_stop, parts = w
    G, BN, tile = C["G"], C["BN"], C["TILE_BYTES"]
    th = np.arange(128)
    warp, lane = th // 32, th % 32
    rows = [cw * 64 + warp * 16 + lane // 4, cw * 64 + warp * 16 + lane // 4 + 8]
    q_pos = [q0 + r // G for r in rows]
    warp_q_min = q0 + (cw * 64 + warp * 16) // G
    o = np.zeros((128, 64), np.float32)
    m_row = [np.full(128, -np.inf), np.full(128, -np.inf)]
    l_row = [np.zeros(128), np.zeros(128)]
    for j in range(n_tiles):
        s, n0 = j % C["STAGES"], kv_begin + j * BN
        fill(j, s)
        sc = np.zeros((128, 64), np.float32)
        for ks in range(C["D"] // 16):
            hoff, koff = (ks // 4) * C["HALF_BYTES"], (ks % 4) * 32
            a = read_operand(smem, desc_kmajor(C["OFF_Q"] + hoff + cw * 64 * 128 + koff), 64, k_major=True)
            b = read_operand(smem, desc_kmajor(C["OFF_K"] + s * tile + hoff + koff), 128, k_major=True)
            sc = wgmma(sc, a, b, scale_d=ks > 0)
        need_mask = (n0 + BN > kv_stop) | (C["kCausal"] & (n0 + BN - 1 > warp_q_min + shift))
        i = np.arange(64)[None, :]
        key = n0 + 8 * (i // 4) + 2 * (lane[:, None] % 4) + (i & 1)
        qp = np.where(((i // 2) & 1) == 1, q_pos[1][:, None], q_pos[0][:, None])
        masked = need_mask[:, None] & ((key >= kv_stop) | (C["kCausal"] & (key > qp + shift)))
        sc = np.where(masked, -np.inf, sc * np.float32(scale_log2))
        for r in range(2):
            cols = [4 * c + 2 * r + e for c in range(16) for e in range(2)]
            m_new = np.maximum(m_row[r], quad_max(sc[:, cols].max(axis=1)))
            m_use = np.where(m_new == -np.inf, 0.0, m_new)
            alpha = np.exp2(m_row[r] - m_use)
            m_row[r] = m_new
            sc[:, cols] = np.exp2(sc[:, cols] - m_use[:, None])
            o[:, cols] *= alpha[:, None]
            l_row[r] = l_row[r] * alpha + sc[:, cols].sum(axis=1)
        for kk in range(8):
            b = read_operand(smem, desc_mnmajor(C["OFF_V"] + s * tile + kk * 2048, C["HALF_BYTES"]), 128, False)
            o = wgmma(o, a_regs_to_matrix(bf16(sc[:, 8 * kk : 8 * kk + 8])), b, scale_d=True)
    for r in range(2):
        ltot = quad_sum(l_row[r])
        for t in range(128):
            tok, head = rows[r][t] // G, kvh * G + rows[r][t] % G
            if rows[r][t] < C["ROWS"] and q0 + tok < q_len:
                empty = ltot[t] == 0
                inv = 0.0 if empty else 1.0 / ltot[t]
                qrow = q_start + q0 + tok
                dst_o, dst_lse, at = (part["o"], part["lse"], bx) if C["kDecode"] and parts > 1 else (out, lse, qrow)
                for c in range(16):
                    col = 8 * c + 2 * (lane[t] % 4)
                    dst_o[at, head, col : col + 2] = o[t, [4 * c + 2 * r, 4 * c + 2 * r + 1]] * inv
                if lane[t] % 4 == 0:
                    dst_lse[at, head] = -np.inf if empty else m_row[r][t] + np.log2(ltot[t])


def merge(C, kv_indptr, part, out, lse):
    """Port of gqa_merge(): combine the chunks of each split decode sequence (base-2 LSEs)."""
    batch = len(kv_indptr) - 1
    for b in range(batch):
        first = sum(work_items_of(C, None, kv_indptr, i) for i in range(b))
        parts = work_items_of(C, None, kv_indptr, b)
        if parts == 1:
            continue
        for head in range(C["H"]):
            lc = part["lse"][first : first + parts, head].astype(np.float32)
            m = lc.max()
            if m == -np.inf:
                out[b, head], lse[b, head] = 0.0, -np.inf
                continue
            total = m + np.log2(np.exp2(lc - m).sum())
            out[b, head] = (np.exp2(lc - total)[:, None] * part["o"][first : first + parts, head]).sum(0)
            lse[b, head] = total


def run_model(C, q, k, v, qo_indptr, kv_indptr, kv_indices, sm_scale, swizzle=True, shift_bug=False):
    batch = len(kv_indptr) - 1
    tokens = q.shape[0]
    kv_total = len(kv_indices) if C["kPaged"] else k.shape[0]
    work_items = kv_total // C["kSplitKeys"] + batch if C["kDecode"] else -(-tokens // C["TOK"]) + batch
    out = np.full(q.shape, np.nan, np.float32)
    lse = np.full(q.shape[:2], np.nan, np.float32)
    part = {"o": np.full((work_items, C["H"], C["D"]), np.nan, np.float32),
            "lse": np.full((work_items, C["H"]), np.nan, np.float32)}
    for bx in range(work_items):
        w = find_work(C, bx, qo_indptr, kv_indptr, batch)
        if w is None:
            continue
        q_start, q_len, q0, kv_start, kv_len, kv_begin, kv_stop, _ = w
        shift = 0 if (shift_bug or not C["kCausal"]) else kv_len - q_len
        kv_end = max(0, min(kv_len, q0 + C["TOK"] + shift)) if C["kCausal"] else kv_stop
        n_tiles = -(-(kv_end - kv_begin) // C["BN"])
        for kvh in range(C["HKV"]):
            smem = Smem(C["OFF_BAR"])
            for c in range(2):
                box = (64, C["G"], C["TOK"])
                tma_load(smem, C["OFF_Q"] + c * C["HALF_BYTES"], q, (64 * c, kvh * C["G"], q_start + q0), box)
                tail = C["OFF_Q"] + c * C["HALF_BYTES"] + C["ROWS"] * 128 + np.arange(0, (128 - C["ROWS"]) * 128, 2)
                smem.write(tail, np.zeros(len(tail), np.float32))

            def fill(j, s, smem=smem, kvh=kvh, w=w):
                fill_kv(smem, C, s, j, k, v, kvh, w, kv_indices, swizzle)

            for cw in range(2):
                consumer(smem, C, cw, w, kvh, fill, n_tiles, out, lse, sm_scale * LOG2E, shift, bx, part)
    if C["kDecode"]:
        merge(C, kv_indptr, part, out, lse)
    return out, lse


def indptr(lens):
    return np.concatenate([[0], np.cumsum(lens)]).astype(np.int64)


def make_case(C, q_lens, kv_lens, seed, num_pages=0):
    rng = np.random.default_rng(seed)
    H, HKV, D = C["H"], C["HKV"], C["D"]
    total_q = len(kv_lens) if C["kDecode"] else sum(q_lens)
    q = bf16(rng.standard_normal((total_q, H, D)).astype(np.float32))
    if C["kPaged"]:
        shape = (num_pages, 1, HKV, D)
        kv_indices = rng.permutation(num_pages)[: sum(kv_lens)]
    else:
        shape = (sum(kv_lens), HKV, D)
        kv_indices = None
    k, v = (bf16(rng.standard_normal(shape).astype(np.float32)) for _ in range(2))
    qo = None if C["kDecode"] else indptr(q_lens)
    return q, k, v, qo, indptr(kv_lens), kv_indices


def check(C, case, sm_scale=1.0 / math.sqrt(128), **bugs):
    q, k, v, qo, kvp, kvi = case
    out, lse = run_model(C, q, k, v, qo, kvp, kvi, sm_scale, **bugs)
    want_o, want_lse = reference(q, k, v, qo, kvp, kvi, sm_scale, C["kCausal"])
    assert not np.isnan(out).any() and not np.isnan(lse).any(), "an output was never written"
    bad_o = np.count_nonzero(
        (np.abs(bf16(out) - want_o) > 1e-2) & (np.abs(bf16(out) - want_o) > 1e-2 * np.abs(want_o))
    )
    finite = np.isfinite(want_lse)
    lse_ok = np.array_equal(np.isfinite(lse), finite) and np.allclose(lse[finite], want_lse[finite], atol=1e-4)
    return bad_o, lse_ok


@pytest.mark.slow
def test_ragged_model_matches_reference():
    """Three sequences (one shorter than a tile, one spanning tiles and a 128-key boundary), kv = q lens,
    plus one with more keys than queries (bottom-right causal shift) and one with no query."""
    C = constants(RAGGED)
    assert (C["H"], C["HKV"], C["G"], C["TOK"], C["kPaged"], C["kCausal"]) == (32, 4, 8, 16, False, True)
    case = make_case(C, [5, 37, 0, 9], [5, 37, 3, 140], seed=1)
    assert check(C, case) == (0, True)


@pytest.mark.slow
def test_paged_prefill_model_matches_reference():
    """G = 3: 42 tokens x 3 heads = 126 rows per tile; pages drawn without replacement."""
    C = constants(PAGED)
    assert (C["H"], C["HKV"], C["G"], C["TOK"], C["ROWS"], C["kPaged"]) == (24, 8, 3, 42, 126, True)
    case = make_case(C, [50, 7], [50, 135], seed=2, num_pages=300)
    assert check(C, case) == (0, True)


@pytest.mark.slow
def test_paged_decode_model_matches_reference():
    """One query per sequence; a sequence of 1100 keys is split into 3 chunks of kSplitKeys and merged;
    an empty sequence gets output 0 and lse -inf (as the reference)."""
    C = constants(DECODE)
    assert (C["kDecode"], C["kCausal"], C["kPaged"], C["kSplitKeys"]) == (True, False, True, 512)
    case = make_case(C, [], [1, 1100, 0, 130], seed=3, num_pages=1400)
    assert check(C, case) == (0, True)


@pytest.mark.slow
def test_model_catches_a_gather_without_swizzle_and_a_top_left_mask():
    """Deliberately wrong variants fail: the gather must write the TMA swizzle pattern the descriptors
    expect, and the causal mask must be shifted by kv_len - q_len."""
    C = constants(PAGED)
    case = make_case(C, [20], [20], seed=4, num_pages=64)
    assert check(C, case, swizzle=False)[0] > 0
    C = constants(RAGGED)
    case = make_case(C, [6], [30], seed=5)
    bad, lse_ok = check(C, case, shift_bug=True)
    assert bad > 0 and not lse_ok


def test_work_list_covers_every_tile_once():
    """find_work over the launch's upper bound: every (sequence, tile) exactly once, the rest idle."""
    for problem in (RAGGED, PAGED):
        C = constants(problem)
        q_lens = [0, 1, C["TOK"], C["TOK"] + 1, 3 * C["TOK"] - 1, 0, 7]
        qo = indptr(q_lens)
        seen = []
        for bx in range(-(-sum(q_lens) // C["TOK"]) + len(q_lens)):
            w = find_work(C, bx, qo, qo, len(q_lens))
            assert w is None or (w[5], w[6], w[7]) == (0, w[4], 1)  # prefill: all keys, one part
            if w is not None:
                seen.append((w[0], w[2]))
        want = [(qo[b], t * C["TOK"]) for b, n in enumerate(q_lens) for t in range(-(-n // C["TOK"]))]
        assert sorted(seen) == sorted(want) and len(seen) == len(set(seen))


# ----------------------------------------------------------------------------- paged producer protocol


def paged_agents(world: World, C: dict, n_tiles: int, threads: int, early_arrive: bool = False):
    """Port of the paged producer loop (cp.async groups, wait_group 1, fence, arrive for tile j - 1) and
    the consumer loop, with `threads` producer threads (the kernel has 128; the protocol is per thread).

    A cp.async lands at a random later time; wait_group N blocks until all but the N newest groups of
    the thread have landed. early_arrive=True publishes tile j before waiting for its copies."""
    stages = C["STAGES"]
    kfull = [Barrier(threads) for _ in range(stages)]
    vfull = [Barrier(threads) for _ in range(stages)]
    empty = [Barrier(C["kConsumerWarps"]) for _ in range(stages)]

    def copy(buffer, version, landed):
        yield None
        world.versions[buffer] = version
        landed.append(version)

    def producer(t):
        landed: list[int] = []

        def wait_group(n, issued):  # groups are tiles 0..issued-1; all but the n newest must have landed
            while not set(range(issued - n)) <= set(landed):
                yield None

        for j in range(n_tiles):
            s = j % stages
            if j >= stages:
                yield Wait(empty[s], ((j // stages) + 1) & 1)
            world.agents.append(copy(f"KV{s}.{t}", j, landed))
            if early_arrive:
                kfull[s].arrive(), vfull[s].arrive()
            elif j > 0:
                yield from wait_group(1, j + 1)
                kfull[(j - 1) % stages].arrive(), vfull[(j - 1) % stages].arrive()
            yield None
        if n_tiles and not early_arrive:
            yield from wait_group(0, n_tiles)
            kfull[(n_tiles - 1) % stages].arrive(), vfull[(n_tiles - 1) % stages].arrive()

    def consumer_warp():
        for j in range(n_tiles):
            s, phase = j % stages, (j // stages) & 1
            for bar in (kfull[s], vfull[s]):
                yield Wait(bar, phase)
                for _ in range(2):  # at issue and at wait_group 0
                    for t in range(threads):
                        world.expect(f"KV{s}.{t}", j)
                    yield None
            empty[s].arrive()

    return [producer(t) for t in range(threads)] + [consumer_warp() for _ in range(C["kConsumerWarps"])]


@pytest.mark.parametrize("n_tiles", [1, 2, 5])
def test_paged_producer_protocol_is_safe(n_tiles):
    C = constants(PAGED)
    many_schedules(lambda w: paged_agents(w, C, n_tiles, threads=3), seeds=120)


def test_protocol_model_catches_an_arrive_before_the_copies_land():
    C = constants(PAGED)
    with pytest.raises(Hazard):
        many_schedules(lambda w: paged_agents(w, C, 4, threads=2, early_arrive=True), seeds=120)


def test_decode_work_list_splits_every_sequence_into_chunks():
    """Decode: max(1, ceil(kv_len / kSplitKeys)) chunks per sequence, covering its keys once, inside
    the launch's bound (total keys // kSplitKeys + batch)."""
    C = constants(DECODE)
    kv_lens = [0, 1, C["kSplitKeys"], C["kSplitKeys"] + 1, 5 * C["kSplitKeys"] - 3, 77]
    kvp = indptr(kv_lens)
    bound = sum(kv_lens) // C["kSplitKeys"] + len(kv_lens)
    chunks: dict[int, list[tuple[int, int]]] = {}
    for bx in range(bound):
        w = find_work(C, bx, None, kvp, len(kv_lens))
        if w is not None:
            chunks.setdefault(w[0], []).append((w[5], w[6]))
            assert w[7] == max(1, -(-kv_lens[w[0]] // C["kSplitKeys"]))
    for b, n in enumerate(kv_lens):
        spans = sorted(chunks[b])
        assert spans[0][0] == 0 and spans[-1][1] == n
        assert all(a[1] == b_[0] for a, b_ in zip(spans, spans[1:], strict=False))
