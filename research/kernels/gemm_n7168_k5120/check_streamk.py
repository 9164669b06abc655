"""CPU checks of the DRAFT research/kernels/gemm_n7168_k5120/wgmma_tma_streamk.cu (no GPU involved). Run from the
repository root:

    python research/kernels/gemm_n7168_k5120/check_streamk.py [--quick]

The draft is the persistent kernel (solutions/gemm_n7168_k5120/wgmma_tma_persistent.cu, checked by
check_schedule.py beside this file) with a stream-K tail; only the schedule and the fixup are new, so only they
are checked here. The ring / staging protocol and the index maths are the persistent kernel's, unchanged apart
from the per-item k range, and check_schedule.py covers them.

a. Schedule: a port of run()'s dp_units policy, sk_begin() and for_each_item(), for the workloads' M values and a
   few ragged M, grid 132 and 114, kClusterM 1 and 2: every (tile, k-block) computed exactly once, every tail
   unit has exactly one finisher (the segment with kb0 == 0), each cluster (so each CTA) writes at most one
   partial, and only in its first stream-K segment, the kernel's contributor loop finds exactly the clusters that
   wrote a partial of that unit, every partial is read by exactly one finisher, and the wait graph (program order
   inside a cluster + finisher -> contributor) is acyclic. Also the dp = floor policy (not used by the kernel),
   to show the kernel's general contributor loop stays correct with several contributors per unit. Prints the
   balance (k-blocks per cluster) and the predicted rounds vs the persistent kernel's.
b. Numerics: C built by summing per-segment fp32 partials in the kernel's order (finisher's own, then each
   contributor's in loop order), bf16 once, for small ragged shapes, against bf16(A @ B^T); every element of C
   written exactly once. Broken variants must fail.
c. Flag protocol: contributor (8 consumer warps write their slot part, named barrier, one thread sets the flag)
   and finisher (one thread spins on the flag, named barrier, 8 warps read) as agents on pipeline_model under
   random interleavings, a chain of CTAs that are each a contributor and later a finisher (named barrier 3
   reused). A reader that reads before the data is published is caught; broken variants must fail. The model
   is sequentially consistent: it checks the ordering of the protocol's steps, not the PTX memory model (the
   kernel relies on __threadfence + bar.sync + st.release.gpu / ld.acquire.gpu + bar.sync for that).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT))

from research.kernel_models.hw_model import bf16  # noqa: E402
from research.kernel_models.kernel_source import kernel_constants  # noqa: E402
from research.kernel_models.pipeline_model import Barrier, Hazard, Wait, World, run_schedule  # noqa: E402
from research.kernels.gemm_n7168_k5120 import check_schedule as persistent  # noqa: E402

KERNEL = Path(__file__).resolve().parent / "wgmma_tma_streamk.cu"
SRC = KERNEL.read_text()
C = kernel_constants(KERNEL)
BM, BN, BK, GROUP_M = C["BM"], C["BN"], C["BK"], C["GROUP_M"]
# unit_coords is ported in check_schedule.py with the persistent kernel's constants: they must be the same.
assert (persistent.BM, persistent.BN, persistent.BK, persistent.GROUP_M) == (BM, BN, BK, GROUP_M)
cdiv, unit_coords = persistent.cdiv, persistent.unit_coords

# The lines of the kernel that the ports below follow (a change there must show up here).
for needle in (
    "const int dp_units = (units > ncl && units % ncl != 0) ? (units / ncl - 1) * ncl : units;",
    "return static_cast<int>((static_cast<long long>(c) * T) / ncl);",
    "for (int u = cid; u < dp_units; u += ncl) f(u, 0, k_tiles);",
    "const int kb1 = min(k_tiles, kb0 + (g1 - g));",
    "for (int c2 = cid + 1; c2 < nclusters && sk_begin(c2, sk_T, nclusters) < unit_end; ++c2) {",
    "const int cta2 = c2 * kClusterM + rank;",
    "if (kb0 > 0) {",
    "if (kb1 < k_tiles) {",
):
    assert needle in SRC, f"kernel source changed: {needle!r} not found"


# ----------------------------------------------------------------------------- ports of the kernel
def dp_policy(units: int, ncl: int, policy: str = "kernel") -> int:
    """Port of run()'s dp_units ('kernel'); 'floor' keeps floor(units/ncl) rounds data-parallel (not used)."""
    if units > ncl and units % ncl != 0:
        return (units // ncl - (1 if policy == "kernel" else 0)) * ncl
    return units


def sk_begin(c: int, T: int, ncl: int) -> int:
    return (c * T) // ncl


def items(
    cid: int, ncl: int, units: int, dp_units: int, kb: int, bug: str = ""
) -> list[tuple[int, int, int]]:
    """Port of for_each_item(): (u, kb0, kb1) of cluster cid in order."""
    out = [(u, 0, kb) for u in range(cid, dp_units, ncl)]
    sk = units - dp_units
    if sk > 0:
        T = sk * kb
        g, g1 = sk_begin(cid, T, ncl), sk_begin(cid + 1, T, ncl)
        while g < g1:
            lu = g // kb
            kb0 = g - lu * kb
            kb1 = kb0 + (g1 - g) if bug == "no_min" else min(kb, kb0 + (g1 - g))
            out.append((dp_units + lu, kb0, kb1))
            g += kb1 - kb0
    return out


def contributors(cid: int, ncl: int, u: int, units: int, dp_units: int, kb: int, bug: str = "") -> list[int]:
    """Port of the finisher's loop: clusters c2 = cid+1, ... whose stream-K range starts inside unit u."""
    T = (units - dp_units) * kb
    unit_end = (u - dp_units + 1) * kb
    out, c2 = [], cid + 1
    while c2 < ncl and (sk_begin(c2, T, ncl) <= unit_end if bug == "le" else sk_begin(c2, T, ncl) < unit_end):
        out.append(c2)
        c2 += 1
    return out


def launch(M: int, N: int, resident: int, cm: int, policy: str = "kernel") -> tuple[int, int, int, int]:
    """(units, ncl, dp_units, units_m) as run() computes them (tiles_n from N)."""
    units_m = cdiv(cdiv(M, BM), cm)
    units = units_m * cdiv(N, BN)
    ncl = min(resident // cm, units)
    return units, ncl, dp_policy(units, ncl, policy), units_m


# ----------------------------------------------------------------------------- a. schedule
def schedule_facts(
    M: int, N: int, K: int, resident: int, cm: int, policy: str = "kernel", bug: str = ""
) -> dict:
    units, ncl, dp_units, units_m = launch(M, N, resident, cm, policy)
    tiles_n, kb = cdiv(N, BN), cdiv(K, BK)
    seqs = [items(c, ncl, units, dp_units, kb, bug) for c in range(ncl)]
    # coverage per CTA tile and k-block
    seen: dict[tuple[int, int, int], int] = {}
    for c, seq in enumerate(seqs):
        for u, kb0, kb1 in seq:
            assert 0 <= kb0 < kb1 <= kb, f"bad k range {(u, kb0, kb1)} of cluster {c}"
            um, tn = unit_coords(u, units_m, tiles_n, cm)
            for r in range(cm):
                for k in range(kb0, kb1):
                    key = ((um * cm + r) * BM, tn * BN, k)
                    seen[key] = seen.get(key, 0) + 1
    for tm in range(cdiv(M, BM)):
        for tn in range(tiles_n):
            for k in range(kb):
                assert seen.get((tm * BM, tn * BN, k)) == 1, (
                    f"(tile {tm},{tn}, kb {k}) computed {seen.get((tm * BM, tn * BN, k), 0)} times"
                )
    assert all(n == 1 for n in seen.values()), "a phantom (tile, kb) computed twice"
    assert all(m0 < M or (cm == 2 and cdiv(M, BM) % 2 == 1) for m0, _, _ in seen)
    # segment kinds, finishers, partials
    finisher: dict[int, int] = {}
    partials: dict[int, list[int]] = {}
    for c, seq in enumerate(seqs):
        n_part = 0
        for j, (u, kb0, kb1) in enumerate(seq):
            if u < dp_units:
                assert (kb0, kb1) == (0, kb) and (u - c) % ncl == 0
            if kb0 == 0:
                assert u not in finisher, f"unit {u} has two segments with kb0 == 0"
                finisher[u] = c
                if kb1 < kb:
                    assert j == len(seq) - 1, "a split unit's finisher is not the last segment of its range"
            else:
                n_part += 1
                assert j == sum(1 for x in seq if x[0] < dp_units), (
                    "a partial that is not the first stream-K segment"
                )
                partials.setdefault(u, []).append(c)
        assert n_part <= 1, f"cluster {c} writes {n_part} partials (one workspace slot per CTA)"
    assert sorted(finisher) == list(range(units)), "a unit without finisher"
    max_contrib = 0
    for u, c in finisher.items():
        u_kb1 = next(x[2] for x in seqs[c] if x[0] == u)
        got = contributors(c, ncl, u, units, dp_units, kb, bug) if u_kb1 < kb else []
        assert got == sorted(partials.get(u, [])), (
            f"unit {u}: loop finds {got}, schedule has {partials.get(u, [])}"
        )
        max_contrib = max(max_contrib, len(got))
    # wait graph: node (c, j) -> (c, j-1) (program order) and finisher -> each contributor's segment
    pos = {(c, u): j for c, seq in enumerate(seqs) for j, (u, kb0, _) in enumerate(seq) if kb0 > 0}
    edges: dict[tuple[int, int], list[tuple[int, int]]] = {}
    waiting = set()
    for c, seq in enumerate(seqs):
        for j, (u, kb0, kb1) in enumerate(seq):
            e = [(c, j - 1)] if j else []
            if kb0 == 0 and kb1 < kb:
                for c2 in contributors(c, ncl, u, units, dp_units, kb, bug):
                    assert (c2, u) in pos, (
                        f"finisher of unit {u} waits on cluster {c2}, which has no partial of it"
                    )
                    e.append((c2, pos[(c2, u)]))
                    waiting.add((c, j))
            edges[(c, j)] = e
    assert not any(
        (c2, j2) in waiting for (c, j) in waiting for (c2, j2) in edges[(c, j)][1 if j else 0 :]
    ), "a finisher waits on a segment that waits itself"
    order, state = [], dict.fromkeys(edges, 0)
    for start in edges:  # iterative DFS topological sort: a back edge is a cycle (a deadlock)
        if state[start]:
            continue
        stack = [(start, iter(edges[start]))]
        state[start] = 1
        while stack:
            node, it = stack[-1]
            nxt = next(it, None)
            if nxt is None:
                state[node] = 2
                order.append(node)
                stack.pop()
            elif state[nxt] == 1:
                raise AssertionError("cycle in the wait graph")
            elif state[nxt] == 0:
                state[nxt] = 1
                stack.append((nxt, iter(edges[nxt])))
    # balance and slack (uniform speed: time = k-blocks done so far in the cluster)
    loads = [sum(kb1 - kb0 for _, kb0, kb1 in seq) for seq in seqs]
    end_time = {}
    for c, seq in enumerate(seqs):
        t = 0
        for j, (_, kb0, kb1) in enumerate(seq):
            t += kb1 - kb0
            end_time[(c, j)] = t
    slack = [end_time[n] - end_time[d] for n in waiting for d in edges[n][1 if n[1] else 0 :]]
    return dict(
        units=units,
        ncl=ncl,
        dp=dp_units,
        kb=kb,
        loads=loads,
        max_contrib=max_contrib,
        split=sum(1 for u in finisher if u in partials),
        slack=min(slack) if slack else None,
        segs=max(len(s) for s in seqs),
    )


def check_schedule(quick: bool) -> None:
    wl = ROOT / "problems/workloads/gemm/gemm_n7168_k5120.jsonl"
    ms = sorted(
        {json.loads(line)["workload"]["axes"]["M"] for line in wl.read_text().splitlines() if line.strip()}
    )
    N, K = 7168, 5120
    extra = [1, 127, 129, 300, 4096 + 64, 8192 + 128, 8192 - 128, 12288]
    if quick:
        extra = extra[:4]
    Ks = [K, 64, 200, 130 * 64 + 1]
    for policy in ("kernel", "floor"):
        for cm in (2, 1):
            for resident in (132, 114):
                for M in ms + extra:
                    for k in Ks if M in ms else [K]:
                        f = schedule_facts(M, N, k, resident, cm, policy)
                        if policy == "kernel":
                            assert f["max_contrib"] <= 1, (
                                "kernel policy: a unit with more than one contributor"
                            )
                            assert f["slack"] is None or f["slack"] > 0
                        if M in ms and k == K:
                            lo, hi = min(f["loads"]), max(f["loads"])
                            persist_rounds = cdiv(f["units"], f["ncl"])
                            print(
                                f"  [{policy}] M={M} kClusterM={cm} grid={cm * f['ncl']}: {f['units']} units, dp {f['dp']}"
                                f" ({f['dp'] // f['ncl']} rounds), tail {f['units'] - f['dp']}; k-blocks/cluster"
                                f" {lo}..{hi} (ideal {f['units'] * f['kb'] / f['ncl']:.1f}); predicted"
                                f" {hi / f['kb']:.3f} unit-times vs persistent {persist_rounds}"
                                f" (ideal {f['units'] / f['ncl']:.3f}); split units {f['split']}, max contributors"
                                f" {f['max_contrib']}, segments/cluster <= {f['segs']}, min finisher slack"
                                f" {f['slack']} k-blocks"
                            )
    # broken variants: kb1 not clipped at the unit end; the contributor loop with `<=` (only differs from `<`
    # when a range lies strictly inside a unit and the next one starts on its end: not under the kernel's
    # policy, where every range is longer than a unit, so it is tried under the floor policy too)
    for bug in ("no_min", "le"):
        failed = []
        for M, res, cm, policy in (
            (8192, 132, 2, "kernel"),
            (8192, 132, 2, "floor"),
            (4096, 132, 2, "floor"),
            (2048, 114, 1, "floor"),
            (300, 114, 1, "floor"),
        ):
            for k in (K, 200, 64 * 7):
                try:
                    schedule_facts(M, N, k, res, cm, policy, bug=bug)
                except AssertionError as e:
                    failed.append(f"M={M} K={k} [{policy}]: {str(e)[:60]}")
        assert failed, f"broken schedule variant {bug!r} passed everywhere"
        print(f"  broken variant {bug!r}: fails as it should in {len(failed)}/15 configs, e.g. {failed[0]}")
    print(
        "a. schedule: every (tile, k-block) once, one finisher per unit, <= 1 partial per CTA, contributor"
        " loop matches, wait graph acyclic  OK"
    )


# ----------------------------------------------------------------------------- b. numerics
def numeric(
    M: int, N: int, K: int, cm: int, resident: int, policy: str = "kernel", bug: str = "", seed: int = 0
) -> None:
    rng = np.random.default_rng(seed)
    A = bf16(rng.standard_normal((M, K)).astype(np.float32))
    B = bf16(rng.standard_normal((N, K)).astype(np.float32))
    units, ncl, dp_units, units_m = launch(M, N, resident, cm, policy)
    tiles_n, kb = cdiv(N, BN), cdiv(K, BK)
    Kp, Mp, Np = kb * BK, cdiv(M, BM * cm) * BM * cm, tiles_n * BN  # TMA zero-fills out of bounds
    Ap = np.zeros((Mp, Kp), np.float32)
    Ap[:M, :K] = A
    Bp = np.zeros((Np, Kp), np.float32)
    Bp[:N, :K] = B
    out = np.full((M, N), np.nan, np.float32)
    written = np.zeros((M, N), np.int32)
    ws: dict[int, np.ndarray] = {}  # slot per CTA
    seqs = [items(c, ncl, units, dp_units, kb, "no_min" if bug == "no_min" else "") for c in range(ncl)]

    def seg(m0: int, n0: int, kb0: int, kb1: int) -> np.ndarray:
        acc = np.zeros((BM, BN), np.float32)
        for k in range(kb0, min(kb1, kb)):
            a = Ap[m0 : m0 + BM, k * BK : (k + 1) * BK]
            b = Bp[n0 : n0 + BN, k * BK : (k + 1) * BK]
            acc += (a @ b.T).astype(np.float32)
        return acc

    # contributors run first (they are the first stream-K segments; the model does them in any order before the
    # finishers, which is what the flags enforce)
    for c, seq in enumerate(seqs):
        for u, kb0, kb1 in seq:
            if kb0 > 0:
                um, tn = unit_coords(u, units_m, tiles_n, cm)
                for r in range(cm):
                    cta = c * cm + r
                    assert cta not in ws, "a CTA writes its workspace slot twice"
                    ws[cta] = seg((um * cm + r) * BM, tn * BN, kb0, kb1)
    for c, seq in enumerate(seqs):
        for u, kb0, kb1 in seq:
            if kb0 > 0:
                continue
            um, tn = unit_coords(u, units_m, tiles_n, cm)
            for r in range(cm):
                m0, n0 = (um * cm + r) * BM, tn * BN
                acc = seg(m0, n0, kb0, kb1)
                if kb1 < kb and bug != "no_fixup":
                    for c2 in contributors(c, ncl, u, units, dp_units, kb):
                        cta2 = c2 * cm + (0 if bug == "wrong_rank" else r)
                        acc += ws[cta2]
                rows = slice(m0, min(m0 + BM, M))
                cols = slice(n0, min(n0 + BN, N))
                if m0 < M:
                    out[rows, cols] = bf16(acc[: rows.stop - m0, : cols.stop - n0])
                    written[rows, cols] += 1
    ref = bf16((A.astype(np.float64) @ B.astype(np.float64).T).astype(np.float32))
    assert np.all(written == 1), "an element of C written 0 or 2+ times"
    err = np.abs(out - ref)
    assert np.all(err <= 1e-2 + 1e-2 * np.abs(ref)), f"max error {np.nanmax(err)}"


def check_numeric(quick: bool) -> None:
    shapes = [  # (M, N, K, kClusterM, resident CTAs, policy)
        (300, 520, 1000, 2, 8, "kernel"),
        (700, 1100, 520, 1, 7, "kernel"),
        (520, 780, 1500, 2, 6, "kernel"),
        (700, 1100, 520, 1, 7, "floor"),  # several contributors per unit (the kernel's loop is general)
        (300, 520, 1000, 2, 10, "floor"),
    ]
    if quick:
        shapes = shapes[:2] + shapes[3:4]
    for M, N, K, cm, res, policy in shapes:
        units, ncl, dp, _ = launch(M, N, res, cm, policy)
        f = schedule_facts(M, N, K, res, cm, policy)
        numeric(M, N, K, cm, res, policy)
        print(
            f"  [{policy}] M={M} N={N} K={K} kClusterM={cm} clusters={ncl}: {units} units, dp {dp}, split units"
            f" {f['split']}, max contributors {f['max_contrib']}: matches bf16(A @ B^T), each element written once"
        )
    for bug in ("no_fixup", "wrong_rank", "no_min"):
        try:
            numeric(300, 520, 1000, 2, 8, bug=bug)
        except (AssertionError, KeyError):
            print(f"  broken variant {bug!r}: fails as it should")
        else:
            raise AssertionError(f"broken numeric variant {bug!r} passed")
    print("b. numerics of the segment sums  OK")


# ----------------------------------------------------------------------------- c. flag protocol
def flag_agents(world: World, n_cta: int, bug: str = "") -> list:
    """CTA i (i < n_cta - 1) is a finisher waiting on CTA i+1; CTA i (i > 0) first contributes a partial read by
    CTA i-1. So CTAs 1 .. n-2 use named barrier 3 twice (contributor, then finisher). Per CTA 8 consumer warps;
    warp 0 holds threadIdx.x == 128 (the releasing / spinning thread)."""
    warps = 8
    flag = [Barrier(1) for _ in range(n_cta)]  # a flag: 0 -> 1 once; Wait(flag, 0) = spin until it is 1
    named = [Barrier(warps) for _ in range(n_cta)]  # bar.sync 3, 256 (8 warps), reusable: parity per use

    def cta_warp(i: int, w: int):
        uses = 0
        if i > 0:  # contributor segment (first stream-K item): write slot part w, fence, barrier, flag
            yield None
            if not (bug == "late_write" and w == warps - 1):
                world.versions[f"ws{i}.{w}"] = 1
            if bug != "flag_before_barrier":
                named[i].arrive()
                yield Wait(named[i], uses & 1)
                uses += 1
            if w == 0:
                flag[i].arrive()  # st.release.gpu flag = 1
            if bug == "flag_before_barrier":
                named[i].arrive()
                yield Wait(named[i], uses & 1)
                uses += 1
            if bug == "late_write" and w == warps - 1:
                world.versions[f"ws{i}.{w}"] = 1
            yield None
        if i < n_cta - 1:  # finisher segment (last item): spin, barrier, read slot part w of CTA i+1
            yield None  # own mainloop
            if w == 0:
                yield Wait(flag[i + 1], 0)
            if bug != "no_finisher_barrier":
                named[i].arrive()
                yield Wait(named[i], uses & 1)
                uses += 1
            for _ in range(2):  # the reads take a while
                world.expect(f"ws{i + 1}.{w}", 1)
                yield None

    return [cta_warp(i, w) for i in range(n_cta) for w in range(warps)]


def check_flags(quick: bool) -> None:
    seeds = 60 if quick else 300
    for n_cta in (2, 3, 5):
        for seed in range(seeds):
            world = World()
            run_schedule(world, flag_agents(world, n_cta), seed)
    print(f"  flag protocol: {seeds} interleavings x 3 chain lengths, no early read, no deadlock")
    for bug in ("flag_before_barrier", "no_finisher_barrier", "late_write"):
        caught = 0
        for seed in range(seeds):
            world = World()
            try:
                run_schedule(world, flag_agents(world, 3, bug), seed)
            except Hazard:
                caught += 1
        assert caught > 0, f"the broken variant {bug!r} was never caught"
        print(f"  broken variant {bug!r}: caught in {caught}/{seeds} interleavings")
    print("c. fixup flag protocol  OK")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    print(
        f"constants of {KERNEL.name}: kClusterM={C['kClusterM']} BM={BM} BN={BN} BK={BK} STAGES={C['STAGES']} "
        f"GROUP_M={GROUP_M} SMEM_BYTES={C['SMEM_BYTES']}"
    )
    assert re.search(r"SMEM_BYTES <= 232448", SRC) and C["SMEM_BYTES"] <= 232448
    check_schedule(args.quick)
    check_numeric(args.quick)
    check_flags(args.quick)


if __name__ == "__main__":
    main()
