"""Ports of the TMA kernels' mbarrier producer/consumer loops, loop for loop, for pipeline_model.py's schedules.

Each function returns the agents (Python generators) of one kernel's pipeline; `C` holds the kernel's own
constants (kernel_source.kernel_constants), so a change of stages or tile bytes in the kernel reaches the model.
Used by tests/solutions/test_pipeline_protocols.py and test_bwd_wgmma_model.py.
"""

from __future__ import annotations

from collections.abc import Generator

from research.kernel_models.pipeline_model import Barrier, Wait, World, many_schedules

Agent = Generator[Wait | None, None, None]


def gemm_agents(world: World, C: dict, k_tiles: int, stages: int, early_release: bool = False) -> list[Agent]:
    """Port of gemm_tma_wgmma_kernel's producer and consumer loops (wait_group<1>, then release kt-1); `C`: the
    kernel's constants (kernel_source.kernel_constants of gemm_n7168_k5120/wgmma_tma_ws.cu).

    early_release=True is a deliberately broken variant that frees a stage as soon as its wgmma is issued.
    """
    full = [Barrier(1) for _ in range(stages)]
    empty = [Barrier(C["kConsumerWarps"]) for _ in range(stages)]

    def producer():
        for kt in range(k_tiles):
            s = kt % stages
            if kt >= stages:
                yield Wait(empty[s], ((kt // stages) + 1) & 1)
            full[s].arrive_expect_tx(C["STAGE_BYTES"])
            world.tma(f"A{s}", kt, full[s], C["A_STAGE_BYTES"])
            world.tma(f"B{s}", kt, full[s], C["B_STAGE_BYTES"])
            yield None

    def consumer_warp():
        inflight: list[tuple[int, int]] = []
        for kt in range(k_tiles):
            s = kt % stages
            yield Wait(full[s], (kt // stages) & 1)
            world.expect(f"A{s}", kt)
            world.expect(f"B{s}", kt)
            inflight.append((s, kt))
            if early_release:
                empty[s].arrive()
            yield None  # the wgmma group runs asynchronously
            retired, inflight = inflight[:-1], inflight[-1:]  # wgmma.wait_group 1
            for ps, pk in retired:  # reads lasted until the wait_group that retired them
                world.expect(f"A{ps}", pk)
                world.expect(f"B{ps}", pk)
            if kt > 0 and not early_release:
                empty[(kt - 1) % stages].arrive()
            yield None
        for ps, pk in inflight:
            world.expect(f"A{ps}", pk)
            world.expect(f"B{ps}", pk)

    return [producer()] + [consumer_warp() for _ in range(C["kConsumerWarps"])]


def fa3_agents(world: World, C: dict, n_tiles: int, stages: int) -> list[Agent]:
    """Port of mha_fwd_wgmma_kernel's producer and consumer loops (`C`: fa3_wgmma_tma.cu's constants)."""
    half, tile = C["HALF_BYTES"], C["TILE_BYTES"]
    bar_q = Barrier(1)
    kfull = [Barrier(1) for _ in range(stages)]
    vfull = [Barrier(1) for _ in range(stages)]
    empty = [Barrier(C["kConsumerWarps"]) for _ in range(stages)]

    def producer():
        bar_q.arrive_expect_tx(tile)
        world.tma("Q0", 0, bar_q, half)
        world.tma("Q1", 0, bar_q, half)
        for j in range(n_tiles):
            s = j % stages
            if j >= stages:
                yield Wait(empty[s], ((j // stages) + 1) & 1)
            kfull[s].arrive_expect_tx(tile)
            world.tma(f"K{s}0", j, kfull[s], half)
            world.tma(f"K{s}1", j, kfull[s], half)
            vfull[s].arrive_expect_tx(tile)
            world.tma(f"V{s}0", j, vfull[s], half)
            world.tma(f"V{s}1", j, vfull[s], half)
            yield None

    def consumer_warp():
        yield Wait(bar_q, 0)
        for j in range(n_tiles):
            s, phase = j % stages, (j // stages) & 1
            yield Wait(kfull[s], phase)
            for _ in range(2):  # at issue and at wait_group 0
                world.expect("Q0", 0), world.expect("Q1", 0)
                world.expect(f"K{s}0", j), world.expect(f"K{s}1", j)
                yield None
            yield Wait(vfull[s], phase)
            for _ in range(2):
                world.expect(f"V{s}0", j), world.expect(f"V{s}1", j)
                yield None
            empty[s].arrive()

    return [producer()] + [consumer_warp() for _ in range(C["kConsumerWarps"])]


def bwd_agents(world: World, C: dict, n: int) -> list[Agent]:
    """Port of produce() and the consumer loop shared by bwd_dkdv and bwd_dq (wgmma_tma_ws.cu)."""
    stages = C["STAGES"]
    bar_fix = Barrier(1)
    full = [Barrier(1) for _ in range(stages)]
    empty = [Barrier(C["kConsumerWarps"]) for _ in range(stages)]

    def producer():
        bar_fix.arrive_expect_tx(2 * C["BIG_TILE"])
        for name in ("F0", "F1"):
            for h in range(C["NBLK"]):
                world.tma(f"{name}{h}", 0, bar_fix, C["BIG_HALF"])
        for j in range(n):
            s = j % stages
            if j >= stages:
                yield Wait(empty[s], ((j // stages) + 1) & 1)
            full[s].arrive_expect_tx(C["STAGE_BYTES"])
            for name in ("R0", "R1"):
                for h in range(C["NBLK"]):
                    world.tma(f"{name}{s}{h}", j, full[s], C["SMALL_HALF"])
            yield None

    def consumer_warp():
        yield Wait(bar_fix, 0)
        for j in range(n):
            s = j % stages
            yield Wait(full[s], (j // stages) & 1)
            for _ in range(3):  # first wgmma batch issued, waited; second batch (MN-major reads) waited
                for name in ("F0", "F1"):
                    for h in range(C["NBLK"]):
                        world.expect(f"{name}{h}", 0)
                for name in ("R0", "R1"):
                    for h in range(C["NBLK"]):
                        world.expect(f"{name}{s}{h}", j)
                yield None
            empty[s].arrive()

    return [producer()] + [consumer_warp() for _ in range(C["kConsumerWarps"])]


def check_bwd_protocol(C: dict, n: int, seeds: int = 150) -> None:
    """The backward kernels' pipeline (`C`: wgmma_tma_ws.cu's constants) over `n` tiles under `seeds` random
    interleavings; raises pipeline_model.Hazard on an overwrite or a deadlock."""
    many_schedules(lambda w: bwd_agents(w, C, n), seeds=seeds)
