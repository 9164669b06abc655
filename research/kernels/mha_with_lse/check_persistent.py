"""CPU check of solutions/templates/mha_fwd_fa3_wgmma_tma_persistent.cu.in (the mha_with_lse_d*
`fa3_wgmma_tma_persistent.cu` kernels; no GPU involved; tests/solutions/test_fa3_persistent_model.py runs the
quick form). Run from the repository root:

    python research/kernels/mha_with_lse/check_persistent.py [--seeds N]

1. Protocol: the producer (Q double buffer with full / empty barriers, the K/V ring with separate K and V empty
   barriers, its counter running on across work tiles) and the two consumer warpgroups (four warps each) with
   their ping-pong named barriers (a warpgroup syncs on its own barrier before issuing its wgmmas and arrives on
   the other's after; warpgroup 1 hands the first turn over; the last tile's final hand-over is skipped by
   warpgroup 1), wgmma groups that keep reading their operands until retired, ported onto
   research/kernel_models/pipeline_model under random interleavings, for several work tiles per CTA with 1 to 32
   key tiles each: no deadlock, no Q or K/V buffer refilled while a wgmma may still read it, no warp arriving
   twice in one named-barrier phase, no phase completed by one warpgroup alone, none left open at exit.
   Variants without the Q-empty wait and with the extra final hand-over must be caught.
2. Causal work list: the kernel's pairs of query tiles (QB - 1 - i, i) of one head, strided over the CTAs,
   cover every (head, query tile) exactly once, and the per-CTA load in key tiles is printed.
Like the GEMM checks this tests the protocol against our reading of the ISA; only the GPU run checks the reading.
"""

from __future__ import annotations

import argparse
import random
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT))

from research.kernel_models.pipeline_model import Barrier, Hazard, Wait, World, run_schedule  # noqa: E402

TEMPLATE = ROOT / "solutions" / "templates" / "mha_fwd_fa3_wgmma_tma_persistent.cu.in"
STAGES = 2
WARPS = 4  # per consumer warpgroup


class Named:
    """bar.sync / bar.arrive over both consumer warpgroups (2 x 4 warps), modelled per warp."""

    def __init__(self, name: str) -> None:
        self.name, self.arrived, self.gen = name, set(), 0

    def arrive(self, side: int, warp: int) -> int:
        key = (side, warp)
        if key in self.arrived:
            raise Hazard(f"{self.name}: warp {key} arrives twice in one phase")
        self.arrived.add(key)
        if len(self.arrived) == 2 * WARPS:
            if {k[0] for k in self.arrived} != {0, 1}:
                raise Hazard(f"{self.name}: a phase completed by one warpgroup alone")
            self.arrived, self.gen = set(), self.gen + 1
        return self.gen


def agents(world: World, tiles: list[int], bug: str = "") -> tuple[list, dict[int, Named]]:
    """The producer and the 8 consumer warps of one CTA that takes len(tiles) work tiles of tiles[i] key tiles."""
    qfull = [Barrier(1) for _ in range(2)]
    qempty = [Barrier(2 * WARPS) for _ in range(2)]
    kfull = [Barrier(1) for _ in range(STAGES)]
    vfull = [Barrier(1) for _ in range(STAGES)]
    kempty = [Barrier(2 * WARPS) for _ in range(STAGES)]
    vempty = [Barrier(2 * WARPS) for _ in range(STAGES)]
    named = {1: Named("bar1"), 2: Named("bar2")}
    inflight: dict[tuple[int, int], list[list[tuple[str, object]]]] = {}

    def producer():
        it = 0
        for tl, n_tiles in enumerate(tiles):
            qb = tl & 1
            if tl >= 2 and bug != "no_qempty":
                yield Wait(qempty[qb], ((tl // 2) + 1) & 1)
            qfull[qb].arrive_expect_tx(2)
            world.tma(f"Q{qb}", tl, qfull[qb], 2)
            yield None
            for j in range(n_tiles):
                s, ph = it % STAGES, ((it // STAGES) + 1) & 1
                if it >= STAGES:
                    yield Wait(kempty[s], ph)
                kfull[s].arrive_expect_tx(2)
                world.tma(f"K{s}", (tl, j), kfull[s], 2)
                yield None
                if it >= STAGES:
                    yield Wait(vempty[s], ph)
                vfull[s].arrive_expect_tx(2)
                world.tma(f"V{s}", (tl, j), vfull[s], 2)
                yield None
                it += 1

    def consumer(cw: int, warp: int):
        me = (cw, warp)
        inflight[me] = []
        mine, other = 1 + cw, 2 - cw

        def still_read() -> None:
            for group in inflight[me]:
                for buffer, version in group:
                    world.expect(buffer, version)

        def wait_groups(n: int):  # wgmma.wait_group n: operands are read until a group retires
            while len(inflight[me]) > n:
                still_read()
                yield None
                still_read()
                inflight[me].pop(0)

        def issue(group: list[tuple[str, object]]) -> None:
            inflight[me].append(group)
            still_read()

        def sync(b: int):
            before = named[b].gen
            named[b].arrive(cw, warp)
            while named[b].gen == before:
                yield None

        if cw == 1:
            named[1].arrive(cw, warp)  # the first turn is warpgroup 0's
        it = 0
        for tl, n_tiles in enumerate(tiles):
            last = tl == len(tiles) - 1
            qb = tl & 1
            yield Wait(qfull[qb], (tl // 2) & 1)
            s = it % STAGES
            yield Wait(kfull[s], (it // STAGES) & 1)
            yield from sync(mine)
            issue([(f"Q{qb}", tl), (f"K{s}", (tl, 0))])  # S_0 = Q K_0^T
            named[other].arrive(cw, warp)
            yield from wait_groups(0)
            kempty[s].arrive()
            if n_tiles == 1:
                qempty[qb].arrive()
            yield None
            for j in range(1, n_tiles):
                g, gp = it + j, it + j - 1
                s, sp = g % STAGES, gp % STAGES
                yield Wait(kfull[s], (g // STAGES) & 1)
                yield Wait(vfull[sp], (gp // STAGES) & 1)
                yield from sync(mine)
                issue([(f"Q{qb}", tl), (f"K{s}", (tl, j))])  # S_j = Q K_j^T
                yield None
                issue([(f"V{sp}", (tl, j - 1))])  # O += P_{j-1} V_{j-1}
                named[other].arrive(cw, warp)
                yield from wait_groups(1)  # S_j done: its softmax runs while PV_{j-1} is in flight
                kempty[s].arrive()
                if j == n_tiles - 1:
                    qempty[qb].arrive()
                yield None
                yield from wait_groups(0)
                vempty[sp].arrive()
                yield None
            gp = it + n_tiles - 1
            sp = gp % STAGES
            yield Wait(vfull[sp], (gp // STAGES) & 1)
            yield from sync(mine)
            issue([(f"V{sp}", (tl, n_tiles - 1))])  # the tile's last PV
            if cw == 0 or not last or bug == "always_arrive":
                named[other].arrive(cw, warp)
            yield from wait_groups(0)
            vempty[sp].arrive()
            it += n_tiles
            yield None  # epilogue

    return [producer()] + [consumer(cw, w) for cw in (0, 1) for w in range(WARPS)], named


def run(tiles: list[int], seeds: int, bug: str = "") -> None:
    for seed in range(seeds):
        world = World()
        agent_list, named = agents(world, tiles, bug)
        run_schedule(world, agent_list, seed)
        for b in named.values():
            if b.arrived:
                raise Hazard(f"{b.name}: arrivals left open at exit")


def causal_work(bid: int, grid: int, qb: int, heads: int) -> list[tuple[int, int]]:
    """The (head, query tile) list CTA `bid` of `grid` takes: pairs (QB - 1 - i, i) of one head, strided."""
    pairs_per_head = (qb + 1) >> 1
    num_pairs = pairs_per_head * heads
    out, k = [], 0
    while True:
        p = bid + (k >> 1) * grid
        if p >= num_pairs:
            return out
        u = 2 * (p % pairs_per_head) + (k & 1)
        k += 1
        if u < qb:
            out.append((p // pairs_per_head, (u >> 1) if (u & 1) else (qb - 1 - (u >> 1))))


def check_work_list(verbose: bool = False) -> None:
    for qb, heads, grid in ((32, 192, 132), (5, 3, 4), (7, 2, 3), (1, 5, 2), (2, 1, 8)):
        grid = min(grid, (qb + 1) // 2 * heads)
        seen, loads = [], []
        for bid in range(grid):
            mine = causal_work(bid, grid, qb, heads)
            seen += mine
            loads.append(sum(q + 1 for _, q in mine))
        if sorted(seen) != sorted((h, q) for h in range(heads) for q in range(qb)):
            raise AssertionError(f"causal work list QB={qb} heads={heads} grid={grid}: not every tile once")
        if verbose:
            print(f"QB {qb} heads {heads} grid {grid}: key tiles per CTA min {min(loads)} max {max(loads)} "
                  f"mean {sum(loads) / grid:.1f}")


def check_protocol(seeds: int) -> None:
    for n_work in (1, 2, 3, 5):
        for n_tiles in (1, 2, 3, 4, 9):
            run([n_tiles] * n_work, seeds)
    run([32, 32, 32], max(1, seeds // 4))
    rng = random.Random(1)
    for _ in range(seeds):
        n_work = rng.randint(1, 6)
        run([rng.randint(1, 6) for _ in range(n_work)], max(1, seeds // 2))


def check_broken(seeds: int) -> list[str]:
    """The bug variants; returns those caught (each must be)."""
    caught = []
    for bug in ("no_qempty", "always_arrive"):
        try:
            for n_work in (3, 4):
                for n_tiles in (1, 2, 3):
                    run([n_tiles] * n_work, seeds, bug)
        except Hazard:
            caught.append(bug)
    return caught


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=40)
    args = ap.parse_args()
    check_protocol(args.seeds)
    check_work_list(verbose=True)
    caught = check_broken(max(args.seeds, 50))
    print(f"protocol OK ({args.seeds} interleavings per case); broken variants caught: {caught}")
    return 0 if caught == ["no_qempty", "always_arrive"] else 1


if __name__ == "__main__":
    sys.exit(main())
