"""CPU check of solutions/gemm_n7168_k5120/wgmma_tma_epi_overlap.cu's barrier and staging protocol (no GPU
involved; tests/solutions/test_gemm_overlap_model.py runs the quick form). Run from the repository root:

    python research/kernels/gemm_n7168_k5120/check_overlap.py [--seeds N]

The kernel is wgmma_tma_persistent.cu (check_schedule.py checks its schedule, index maths and protocol) with the
epilogue moved: the previous tile's epilogue chunk c runs after the wgmma issue of the next tile's k-step c, and
the CTA's last tile is stored after its loop. Its producer and consumer loops (ring position and parity carried
across tiles, per-warp releases to every CTA of the cluster, the tile's last stage released after wait_group 0)
and its staging buffers (named barrier per warpgroup, the issuing thread's bulk wait_group.read before each
chunk's barrier) are ported onto research/kernel_models/pipeline_model under random interleavings, for clusters
of 1, 2 and 4 and tile counts and K lengths shorter and longer than the four overlapped k-steps: no overwrite of
data still being read (ring stages and staging buffers), no deadlock, nothing lands in a CTA after it exited.
The variant without the store wait must be caught. Like check_schedule.py this checks the protocol against our
reading of the ISA; only the GPU run checks the reading.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT))

from research.kernel_models.kernel_source import kernel_constants  # noqa: E402
from research.kernel_models.pipeline_model import Barrier, Hazard, Wait, World, run_schedule  # noqa: E402
from research.kernels.gemm_n7168_k5120.check_schedule import TxBarrier  # noqa: E402

KERNEL = ROOT / "solutions" / "gemm_n7168_k5120" / "wgmma_tma_epi_overlap.cu"
C = kernel_constants(KERNEL)
STAGES, BN = C["STAGES"], C["BN"]
CHUNKS = BN // C["EPI_COLS"]
SHAPES = ((3, 5), (2, 1), (4, 4), (1, 7), (3, 2), (3, 9))
"""(tiles per CTA, k-steps per tile): fewer, as many and more k-steps than the overlapped chunks."""


def agents(world: World, cluster_m: int, n_tiles: int, k_tiles: int, bug: str = "") -> list:
    """The producer of each CTA and its consumer warps, for `n_tiles` tiles of `k_tiles` k-steps."""
    warps = C["kConsumerWarps"]
    full = [[TxBarrier(1) for _ in range(STAGES)] for _ in range(cluster_m)]
    empty = [[Barrier(warps * cluster_m) for _ in range(STAGES)] for _ in range(cluster_m)]
    named = [[Barrier(4) for _ in range(2)] for _ in range(cluster_m)]
    cluster = Barrier(cluster_m * (1 + warps))
    exited = [False] * cluster_m
    slice_bytes = C["B_STAGE_BYTES"] // cluster_m
    stores: dict[tuple[int, int], list[list[bool]]] = {(r, wg): [] for r in range(cluster_m) for wg in range(2)}

    def land(dst: int, name: str, version: object, bar: TxBarrier, nbytes: int) -> None:
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
            for kt in range(k_tiles):
                yield Wait(empty[r][stage], phase ^ 1)
                full[r][stage].arrive_expect_tx(C["STAGE_BYTES"])
                land(r, f"A{r}.{stage}", (j, kt), full[r][stage], C["A_STAGE_BYTES"])
                for dst in range(cluster_m):
                    land(dst, f"B{dst}.{stage}.{r}", (j, kt), full[dst][stage], slice_bytes)
                stage, phase = (0, phase ^ 1) if stage + 1 == STAGES else (stage + 1, phase)
                yield None
        yield from finish(r)

    def reads_ok(r: int, stage: int, version: object) -> None:
        world.expect(f"A{r}.{stage}", version)
        for q in range(cluster_m):
            world.expect(f"B{r}.{stage}.{q}", version)

    def release(stage: int) -> None:
        for dst in range(cluster_m):
            empty[dst][stage].arrive()

    def store_reads(r: int, wg: int, buf: int, version: object, done: list[bool]):
        """The TMA store reading one staging box, row block by row block (each warp's stmatrix rows)."""
        yield None
        for w4 in range(4):
            world.expect(f"E{r}.{wg}.{buf}.{w4}", version)
            yield None
        done[0] = True

    def consumer_warp(r: int, w: int):
        wg, issuer = w // 4, w % 4 == 0
        ring = {"stage": 0, "phase": 0, "prev": None, "round": 0}

        def epilogue_chunk(tile: int, c: int):
            world.versions[f"E{r}.{wg}.{c & 1}.{w % 4}"] = (tile, c)  # this warp's stmatrix rows
            yield None
            if issuer and bug != "no_store_wait":
                while any(not d[0] for d in stores[(r, wg)]):
                    yield None
            nb = named[r][wg]
            nb.arrive()
            yield Wait(nb, ring["round"] & 1)
            ring["round"] += 1
            if issuer:
                done = [False]
                stores[(r, wg)].append(done)
                world.agents.append(store_reads(r, wg, c & 1, (tile, c), done))

        def issue(j: int, kt: int, inflight: list):
            yield Wait(full[r][ring["stage"]], ring["phase"])
            reads_ok(r, ring["stage"], (j, kt))
            inflight.append((ring["stage"], (j, kt)))
            yield None

        def retire(kt: int, inflight: list):
            retired, inflight[:] = inflight[:-1], inflight[-1:]  # wgmma.wait_group 1
            for stage, version in retired:
                reads_ok(r, stage, version)
            if kt > 0:
                release(ring["prev"])
            ring["prev"] = ring["stage"]
            s = ring["stage"] + 1
            ring["stage"], ring["phase"] = (0, ring["phase"] ^ 1) if s == STAGES else (s, ring["phase"])
            yield None

        pending = None
        for j in range(n_tiles):
            inflight: list = []
            kt = 0
            for c in range(CHUNKS):  # the first k-steps, each followed by one chunk of the previous tile
                step = kt < k_tiles
                if step:
                    yield from issue(j, kt, inflight)
                if pending is not None:
                    yield from epilogue_chunk(pending, c)
                if step:
                    yield from retire(kt, inflight)
                    kt += 1
            while kt < k_tiles:
                yield from issue(j, kt, inflight)
                yield from retire(kt, inflight)
                kt += 1
            for stage, version in inflight:  # wait_group 0, then the tile's last stage released
                reads_ok(r, stage, version)
            release(ring["prev"])
            pending = j
        if pending is not None:  # the CTA's last tile
            for c in range(CHUNKS):
                yield from epilogue_chunk(pending, c)
        if issuer:
            while any(not d[0] for d in stores[(r, wg)]):
                yield None
        yield from finish(r)

    return ([producer(r) for r in range(cluster_m)]
            + [consumer_warp(r, w) for r in range(cluster_m) for w in range(warps)])


def check_protocol(seeds: int) -> int:
    """Every shape and cluster size under `seeds` interleavings; returns how many broken runs were caught."""
    for cluster_m in (1, 2, 4):
        for n_tiles, k_tiles in SHAPES:
            for seed in range(seeds):
                world = World()
                run_schedule(world, agents(world, cluster_m, n_tiles, k_tiles), seed)
    caught = 0
    for seed in range(seeds):
        world = World()
        try:
            run_schedule(world, agents(world, 2, 3, 5, "no_store_wait"), seed)
        except Hazard:
            caught += 1
    if not caught:
        raise AssertionError("the variant without the store wait was never caught")
    return caught


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=100)
    args = ap.parse_args()
    caught = check_protocol(args.seeds)
    print(f"overlap protocol: clusters 1, 2, 4 x {len(SHAPES)} shapes x {args.seeds} interleavings OK; "
          f"the variant without the store wait caught in {caught} of {args.seeds}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
