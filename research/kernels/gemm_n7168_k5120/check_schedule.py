"""CPU checks of solutions/gemm_n7168_k5120/wgmma_tma_persistent.cu (no GPU involved; tests/solutions/
test_gemm_persistent_model.py runs the quick form). Run from the repository root:

    python research/kernels/gemm_n7168_k5120/check_schedule.py [--quick]

1. Tile schedule: the persistent static-stride schedule over grouped units visits every output tile exactly
   once, for the workloads' M values (problems/workloads) and a few ragged ones, grid 132 and 114, with the
   kernel's kClusterM and with the other setting (1 <-> 2). Prints the per-CTA load.
2. Index maths replay: the kernel's TMA coordinates (own A tile, the B tile as kClusterM multicast slices),
   descriptors and K advance, the stmatrix epilogue with its explicit 128B-swizzle XOR and the TMA store
   box, run through research/kernel_models/hw_model.py at small ragged shapes (M, N, K not multiples of the
   tile), against bf16(A @ B^T). stmatrix is modelled here from the PTX ISA (lane 8q+r gives the row address
   of row r of matrix q; lane l holds row l/4, columns 2(l%4), 2(l%4)+1 of each matrix).
3. mbarrier protocol: producer and consumer loops (ring position and parity carried across tiles, per-warp
   releases to every CTA of the cluster, the tile's last stage released after wait_group 0) and the
   epilogue staging buffers (named barrier, bulk wait_group.read) ported onto pipeline_model under random
   interleavings: no overwrite of data still being read, no deadlock, nothing lands in a CTA after it exited.
   Deliberately broken variants must fail.
These check our index maths and protocol against our reading of the ISA; only the GPU run checks the reading.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT))

from research.kernel_models.hw_model import (  # noqa: E402
    Smem,
    bf16,
    read_operand,
    swizzle128,
    tma_load,
    wgmma,
    wgmma_acc_coords,
)
from research.kernel_models.kernel_source import kernel_constants  # noqa: E402
from research.kernel_models.pipeline_model import Barrier, Hazard, Wait, World, run_schedule  # noqa: E402

KERNEL = Path(__file__).resolve().parents[3] / "solutions" / "gemm_n7168_k5120" / "wgmma_tma_persistent.cu"
C = kernel_constants(KERNEL)
BM, BN, BK, STAGES, GROUP_M = C["BM"], C["BN"], C["BK"], C["STAGES"], C["GROUP_M"]


# ----------------------------------------------------------------------------- ports of the kernel
def cdiv(a: int, b: int) -> int:
    return (a + b - 1) // b


def unit_coords(u: int, units_m: int, units_n: int, cm: int) -> tuple[int, int]:
    """Port of unit_coords()."""
    g = GROUP_M // cm
    group = g * units_n
    first = (u // group) * g
    rows = min(units_m - first, g)
    r = u % group
    return first + r % rows, r // rows


def cta_tiles(M: int, N: int, grid: int, cta: int, cm: int) -> list[tuple[int, int]]:
    """(m0, n0) of every tile CTA `cta` computes, in order (the producer's and the consumers' loop)."""
    tiles_n = cdiv(N, BN)
    units_m = cdiv(cdiv(M, BM), cm)
    rank, cid, ncl = cta % cm, cta // cm, grid // cm
    out = []
    for u in range(cid, units_m * tiles_n, ncl):
        um, tn = unit_coords(u, units_m, tiles_n, cm)
        out.append(((um * cm + rank) * BM, tn * BN))
    return out


def launch_grid(M: int, N: int, resident: int, cm: int) -> int:
    """Port of run()'s grid: kClusterM * min(resident / kClusterM, units)."""
    units = cdiv(cdiv(M, BM), cm) * cdiv(N, BN)
    return cm * min(resident // cm, units)


def desc_k128(addr: int) -> int:
    """Port of make_desc_k128."""
    return ((addr & 0x3FFFF) >> 4) | (1 << 16) | ((1024 >> 4) << 32) | (1 << 62)


# ----------------------------------------------------------------------------- 1. schedule
def check_schedule() -> None:
    wl = ROOT / "problems/workloads/gemm/gemm_n7168_k5120.jsonl"
    ms = sorted({json.loads(line)["workload"]["axes"]["M"] for line in wl.read_text().splitlines() if line.strip()})
    N = 7168
    for cm in (C["kClusterM"], 3 - C["kClusterM"]):
        for M in ms + [1, 127, 128, 129, 300, 4096 + 64, 8192 + 128]:
            for resident in (132, 114):
                grid = launch_grid(M, N, resident, cm)
                assert grid % cm == 0 and 0 < grid <= resident
                tiles_m, tiles_n = cdiv(M, BM), cdiv(N, BN)
                seen: dict[tuple[int, int], int] = {}
                loads = []
                for cta in range(grid):
                    tl = cta_tiles(M, N, grid, cta, cm)
                    loads.append(len(tl))
                    for t in tl:
                        seen[t] = seen.get(t, 0) + 1
                real = {(tm * BM, tn * BN) for tm in range(tiles_m) for tn in range(tiles_n)}
                assert all(seen.get(t) == 1 for t in real), f"tile missed or repeated (M={M}, grid={grid}, cm={cm})"
                phantom = [t for t in seen if t not in real]
                assert all(m0 >= M for m0, _ in phantom) and all(seen[t] == 1 for t in phantom)
                assert not phantom or (cm == 2 and tiles_m % 2 == 1)
                # the two CTAs of a cluster walk the same unit sequence: same n0 and adjacent m-tiles, same length
                for c0 in range(0, grid, cm):
                    seqs = [cta_tiles(M, N, grid, c0 + r, cm) for r in range(cm)]
                    assert all(len(s) == len(seqs[0]) for s in seqs)
                    for r in range(cm):
                        assert all(a[1] == b[1] and b[0] - a[0] == r * BM for a, b in zip(seqs[0], seqs[r], strict=True))
                if M in ms:
                    print(f"  schedule M={M} cm={cm} grid={grid}: {len(real)} tiles, per CTA {min(loads)}..{max(loads)}"
                          f" (ideal {len(real) / grid:.2f}), phantom {len(phantom)}")
    print("1. schedule: every tile exactly once  OK")


# ----------------------------------------------------------------------------- 2. index maths replay
def stmatrix_x4(smem: Smem, lane_addr: np.ndarray, regs: np.ndarray) -> None:
    """stmatrix.m8n8.x4.b16: regs [32 lanes, 4 matrices, 2 halves]; lane 8q+r addresses row r of matrix q."""
    assert np.all(lane_addr % 16 == 0)
    for q in range(4):
        for r in range(8):
            vals = np.array([regs[4 * r + c // 2, q, c % 2] for c in range(8)], dtype=np.float32)
            smem.write(lane_addr[8 * q + r] + 2 * np.arange(8), vals)


def tma_store(smem: Smem, src: int, out: np.ndarray, written: np.ndarray, c0: int, c1: int) -> None:
    """cp.async.bulk.tensor.2d store, SWIZZLE_128B box {64 cols, 64 rows}: out-of-bounds parts are clipped."""
    assert src % 1024 == 0
    r, col = np.meshgrid(np.arange(64), np.arange(64), indexing="ij")
    inside = (c1 + r < out.shape[0]) & (c0 + col < out.shape[1])
    vals = smem.read(swizzle128(src + r * 128 + 2 * col))
    out[(c1 + r)[inside], (c0 + col)[inside]] = vals[inside]
    written[(c1 + r)[inside], (c0 + col)[inside]] += 1


def replay(M: int, N: int, K: int, cm: int, grid: int, seed: int = 0, bug: str = "") -> None:
    rng = np.random.default_rng(seed)
    A = bf16(rng.standard_normal((M, K)).astype(np.float32))
    B = bf16(rng.standard_normal((N, K)).astype(np.float32))
    out = np.full((M, N), np.nan, np.float32)
    written = np.zeros((M, N), np.int32)
    A_SB, B_SB = C["A_STAGE_BYTES"], C["B_STAGE_BYTES"]
    slice_rows, slice_bytes = BN // cm, (BN // cm) * BK * 2
    sA, sB = 0, STAGES * A_SB
    sEpi = sB + STAGES * B_SB
    assert sEpi % 1024 == 0 and C["EPI_BUF_BYTES"] % 1024 == 0
    smems = [Smem(sEpi + C["EPI_BYTES"]) for _ in range(grid)]
    seqs = [cta_tiles(M, N, grid, cta, cm) for cta in range(grid)]
    k_tiles = cdiv(K, BK)
    acc_row, acc_col = wgmma_acc_coords(BN)
    for c0 in range(0, grid, cm):
        g = 0  # ring position, continuous over the cluster's tiles
        for j in range(len(seqs[c0])):
            accs = {(r, cw): None for r in range(cm) for cw in range(2)}
            for kt in range(k_tiles):
                s = g % STAGES
                for r in range(cm):  # producer of rank r: own A, B slice r multicast to every rank
                    m0, n0 = seqs[c0 + r][j]
                    tma_load(smems[c0 + r], sA + s * A_SB, A, (kt * BK, m0), (BK, BM))
                    for dst in range(cm):
                        off = 0 if bug == "slice_offset" else r * slice_bytes
                        tma_load(smems[c0 + dst], sB + s * B_SB + off, B, (kt * BK, n0 + r * slice_rows),
                                 (BK, slice_rows))
                for r in range(cm):
                    for cw in range(2):
                        da = desc_k128(sA + s * A_SB + cw * 64 * 128)
                        db = desc_k128(sB + s * B_SB)
                        for kk in range(BK // 16):
                            a = read_operand(smems[c0 + r], da + 2 * kk, 64, k_major=True)
                            b = read_operand(smems[c0 + r], db + 2 * kk, BN, k_major=True)
                            first = kt == 0 and kk == 0
                            prev = np.full((128, BN // 2), np.nan, np.float32) if first else accs[(r, cw)]
                            accs[(r, cw)] = wgmma(prev, a, b, scale_d=not first)
                g += 1
            for r in range(cm):  # epilogue of both consumer warpgroups of rank r
                m0, n0 = seqs[c0 + r][j]
                smem = smems[c0 + r]
                for cw in range(2):
                    d = accs[(r, cw)]  # [128 threads, 128 registers]
                    epi = sEpi + cw * 2 * C["EPI_BUF_BYTES"]
                    for c in range(BN // C["EPI_COLS"]):
                        buf = epi + (c & 1) * C["EPI_BUF_BYTES"]
                        for warp in range(4):
                            for p in range(C["EPI_COLS"] // 16):
                                lane = np.arange(32)
                                st_row = warp * 16 + (lane & 7) + 8 * ((lane >> 3) & 1)
                                chunk = 2 * p + (lane >> 4)
                                xor = 0 if bug == "no_xor" else (lane & 7)
                                addr = buf + st_row * 128 + ((chunk ^ xor) << 4)
                                i = (C["EPI_COLS"] // 8) * c + 2 * p
                                t = warp * 32 + lane
                                regs = np.stack([np.stack([d[t, 4 * i + 2 * q], d[t, 4 * i + 2 * q + 1]], -1)
                                                 for q in range(4)], 1)
                                stmatrix_x4(smem, addr, bf16(regs))
                        tma_store(smem, buf, out, written, n0 + c * C["EPI_COLS"], m0 + cw * 64)
    assert acc_row.shape == (128, BN // 2) and acc_col.max() == BN - 1
    ref = bf16((A.astype(np.float64) @ B.astype(np.float64).T).astype(np.float32))
    assert np.all(written == 1), "an element of C written 0 or 2+ times"
    err = np.abs(out - ref)
    assert np.all(err <= 1e-2 + 1e-2 * np.abs(ref)), f"max error {np.nanmax(err)}"


def check_replay(quick: bool) -> None:
    shapes = [(300, 264, 200, 2, 4), (300, 264, 200, 1, 3), (129, 520, 72, 2, 2)]
    if quick:
        shapes = shapes[:1]
    for M, N, K, cm, grid in shapes:
        replay(M, N, K, cm, grid)
        print(f"  replay M={M} N={N} K={K} kClusterM={cm} grid={grid}: matches bf16(A @ B^T)")
    for bug in ("no_xor", "slice_offset"):  # negative controls: a missing swizzle XOR, B slices on top of each other
        try:
            replay(300, 264, 200, 2, 4, bug=bug)
        except AssertionError:
            print(f"  broken variant {bug!r}: fails as it should")
        else:
            raise AssertionError(f"the broken replay variant {bug!r} passed")
    print("2. index maths replay  OK")


# ----------------------------------------------------------------------------- 3. protocol
class TxBarrier(Barrier):
    """mbarrier whose tx-count may go transiently negative (PTX ISA: a complete_tx may precede expect_tx)."""

    def complete_tx(self, nbytes: int) -> None:
        self.tx -= nbytes
        self._maybe_complete()


def protocol_agents(world: World, cm: int, n_tiles: int, k_tiles: int, bug: str = "") -> list:
    """Agents of one cluster: per CTA a producer thread, 8 consumer warps (2 warpgroups) and per warpgroup the
    epilogue (thread 0's TMA stores read the staging buffer asynchronously until wait_group.read)."""
    warps = C["kConsumerWarps"]
    empty_count = warps if bug == "local_release" else C["kConsumerWarps"] * cm
    full = [[TxBarrier(1) for _ in range(STAGES)] for _ in range(cm)]
    empty = [[Barrier(empty_count) for _ in range(STAGES)] for _ in range(cm)]
    named = [[Barrier(4) for _ in range(2)] for _ in range(cm)]
    cluster = Barrier(cm * (1 + warps))
    exited = [False] * cm
    slice_bytes = C["B_STAGE_BYTES"] // cm
    pending_stores: dict[tuple[int, int], list] = {(r, wg): [] for r in range(cm) for wg in range(2)}

    def land(dst: int, name: str, version: int, bar: Barrier, nbytes: int):
        def copy():
            yield None
            if exited[dst]:
                raise Hazard(f"TMA into CTA {dst} after it exited")
            world.versions[name] = version
            bar.complete_tx(nbytes)
        world.agents.append(copy())

    def finish(r: int):
        cluster.arrive()
        yield Wait(cluster, 0)
        exited[r] = True

    def producer(r: int):
        stage, phase = 0, 0
        for j in range(n_tiles):
            if bug == "reset_ring":
                stage, phase = 0, 0
            for kt in range(k_tiles):
                v = (j, kt)
                yield Wait(empty[r][stage], phase ^ 1)
                full[r][stage].arrive_expect_tx(C["STAGE_BYTES"])
                land(r, f"A{r}.{stage}", v, full[r][stage], C["A_STAGE_BYTES"])
                for dst in range(cm):  # multicast slice r of B into every CTA
                    land(dst, f"B{dst}.{stage}.{r}", v, full[dst][stage], slice_bytes)
                stage += 1
                if stage == STAGES:
                    stage, phase = 0, phase ^ 1
                yield None
        yield from finish(r)

    def reads_ok(r: int, stage: int, v) -> None:
        world.expect(f"A{r}.{stage}", v)
        for q in range(cm):
            world.expect(f"B{r}.{stage}.{q}", v)

    def release(r: int, stage: int) -> None:
        for dst in ([r] if bug == "local_release" else range(cm)):
            empty[dst][stage].arrive()

    def consumer_warp(r: int, w: int):
        wg, t0 = w // 4, w % 4 == 0
        stage, phase = 0, 0
        store_round = 0
        for j in range(n_tiles):
            if bug == "reset_ring":
                stage, phase = 0, 0
            inflight, prev = [], None
            for kt in range(k_tiles):
                v = (j, kt)
                yield Wait(full[r][stage], phase)
                reads_ok(r, stage, v)
                inflight.append((stage, v))
                yield None  # the wgmma group runs asynchronously
                retired, inflight = inflight[:-1], inflight[-1:]  # wait_group 1
                for ps, pv in retired:
                    reads_ok(r, ps, pv)
                if kt > 0:
                    release(r, prev)
                prev = stage
                stage += 1
                if stage == STAGES:
                    stage, phase = 0, phase ^ 1
                yield None
            for ps, pv in inflight:  # wait_group 0
                reads_ok(r, ps, pv)
            if bug != "no_last_release":
                release(r, prev)
            for c in range(BN // C["EPI_COLS"]):  # epilogue: this warp's rows of chunk c into buffer c & 1
                key = f"E{r}.{wg}.{c & 1}.{w % 4}"
                world.versions[key] = (j, c)
                yield None
                if t0 and bug != "no_store_wait":  # bulk wait_group.read 0
                    while any(not done[0] for done in pending_stores[(r, wg)]):
                        yield None
                nb = named[r][wg]
                nb.arrive()
                yield Wait(nb, store_round & 1)
                store_round += 1
                if t0:  # TMA store reads the 4 warps' rows asynchronously
                    done = [False]
                    pending_stores[(r, wg)].append(done)
                    world.agents.append(store_read(r, wg, c & 1, (j, c), done))
        if t0:
            while any(not done[0] for done in pending_stores[(r, wg)]):  # wait_group 0 before exit
                yield None
        yield from finish(r)

    def store_read(r: int, wg: int, buf: int, v, done: list):
        yield None
        for w4 in range(4):
            world.expect(f"E{r}.{wg}.{buf}.{w4}", v)
            yield None
        done[0] = True

    agents = [producer(r) for r in range(cm)]
    agents += [consumer_warp(r, w) for r in range(cm) for w in range(warps)]
    return agents


def check_protocol(quick: bool) -> None:
    seeds = 40 if quick else 200
    for cm in (1, 2):
        for n_tiles, k_tiles in ((3, 5), (2, 1), (4, 4), (1, 7)):
            for seed in range(seeds):
                world = World()
                run_schedule(world, protocol_agents(world, cm, n_tiles, k_tiles), seed)
        print(f"  protocol kClusterM={cm}: {seeds} interleavings x 4 shapes, no hazard, no deadlock")
    for bug, cm in (("local_release", 2), ("no_last_release", 1), ("reset_ring", 1), ("no_store_wait", 1)):
        caught = 0
        for seed in range(seeds):
            world = World()
            try:
                run_schedule(world, protocol_agents(world, cm, 3, 5, bug), seed)
            except Hazard:
                caught += 1
        assert caught > 0, f"the broken variant {bug!r} was never caught"
        print(f"  broken variant {bug!r} (kClusterM={cm}): caught in {caught}/{seeds} interleavings")
    print("3. mbarrier / staging protocol  OK")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    print(f"constants of {KERNEL.name}: kClusterM={C['kClusterM']} BM={BM} BN={BN} BK={BK} STAGES={STAGES} "
          f"GROUP_M={GROUP_M} SMEM_BYTES={C['SMEM_BYTES']}")
    check_schedule()
    check_protocol(args.quick)
    check_replay(args.quick)


if __name__ == "__main__":
    main()
