"""The mbarrier protocols of the TMA kernels, ported loop for loop, under random interleavings.

Checks the stage/phase-parity arithmetic: no deadlock, and no stage refilled while a consumer may still
be reading it (wgmma reads shared memory until the wait_group that retires it).
"""

from __future__ import annotations

import pytest

from research.kernel_models.kernel_source import kernel_constants, solution_path
from research.kernel_models.pipeline_model import Barrier, Hazard, Wait, World, many_schedules

GEMM = kernel_constants(solution_path("gemm_n7168_k5120", "wgmma_tma_ws.cu"))
FA3 = kernel_constants(solution_path("mha_with_lse_d128", "fa3_wgmma_tma.cu"))


def gemm_agents(world: World, k_tiles: int, stages: int, early_release: bool = False):
    """Port of gemm_tma_wgmma_kernel's producer and consumer loops (wait_group<1>, then release kt-1).

    early_release=True is a deliberately broken variant that frees a stage as soon as its wgmma is issued.
    """
    full = [Barrier(1) for _ in range(stages)]
    empty = [Barrier(GEMM["kConsumerWarps"]) for _ in range(stages)]

    def producer():
        for kt in range(k_tiles):
            s = kt % stages
            if kt >= stages:
                yield Wait(empty[s], ((kt // stages) + 1) & 1)
            full[s].arrive_expect_tx(GEMM["STAGE_BYTES"])
            world.tma(f"A{s}", kt, full[s], GEMM["A_STAGE_BYTES"])
            world.tma(f"B{s}", kt, full[s], GEMM["B_STAGE_BYTES"])
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

    return [producer()] + [consumer_warp() for _ in range(GEMM["kConsumerWarps"])]


def fa3_agents(world: World, n_tiles: int, stages: int):
    """Port of mha_fwd_wgmma_kernel's producer and consumer loops."""
    half, tile = FA3["HALF_BYTES"], FA3["TILE_BYTES"]
    bar_q = Barrier(1)
    kfull = [Barrier(1) for _ in range(stages)]
    vfull = [Barrier(1) for _ in range(stages)]
    empty = [Barrier(FA3["kConsumerWarps"]) for _ in range(stages)]

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

    return [producer()] + [consumer_warp() for _ in range(FA3["kConsumerWarps"])]


@pytest.mark.parametrize("k_tiles", [1, 3, GEMM["STAGES"], 11])
def test_gemm_pipeline_is_safe(k_tiles):
    many_schedules(lambda w: gemm_agents(w, k_tiles, GEMM["STAGES"]), seeds=150)


@pytest.mark.parametrize("n_tiles", [1, 2, 7])
def test_fa3_pipeline_is_safe(n_tiles):
    many_schedules(lambda w: fa3_agents(w, n_tiles, FA3["STAGES"]), seeds=150)


def test_model_catches_an_early_release():
    """Releasing a stage right after issue (no wait for the wgmma) lets the producer overwrite it."""
    with pytest.raises(Hazard):
        many_schedules(lambda w: gemm_agents(w, 12, 2, early_release=True), seeds=200)


def test_model_catches_a_wrong_parity():
    """Waiting on the empty barrier with the consumer's parity instead of the flipped one is caught."""

    def build(world: World):
        full, empty = Barrier(1), Barrier(1)

        def producer():
            for kt in range(4):
                if kt >= 1:
                    yield Wait(empty, kt & 1)  # wrong: should be (kt + 1) & 1 with one stage
                full.arrive_expect_tx(2)
                world.tma("X", kt, full, 2)
                yield None

        def consumer():
            for kt in range(4):
                yield Wait(full, kt & 1)
                world.expect("X", kt)
                yield None
                world.expect("X", kt)
                empty.arrive()

        return [producer(), consumer()]

    with pytest.raises(Hazard):
        many_schedules(build, seeds=100)


def bwd_agents(world: World, C: dict, n: int):
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


def run_protocol_check(C: dict, n: int, seeds: int = 150) -> None:
    many_schedules(lambda w: bwd_agents(w, C, n), seeds=seeds)
