"""The mbarrier protocols of the TMA kernels, ported loop for loop, under random interleavings.

Checks the stage/phase-parity arithmetic: no deadlock, and no stage refilled while a consumer may still
be reading it (wgmma reads shared memory until the wait_group that retires it).
"""

from __future__ import annotations

import pytest

from research.kernel_models.kernel_source import kernel_constants, solution_path
from research.kernel_models.pipeline_model import Barrier, Hazard, Wait, World, many_schedules
from research.kernel_models.protocols import fa3_agents, gemm_agents

GEMM = kernel_constants(solution_path("gemm_n7168_k5120", "wgmma_tma_ws.cu"))
FA3 = kernel_constants(solution_path("mha_with_lse_d128", "fa3_wgmma_tma.cu"))


@pytest.mark.parametrize("k_tiles", [1, 3, GEMM["STAGES"], 11])
def test_gemm_pipeline_is_safe(k_tiles):
    many_schedules(lambda w: gemm_agents(w, GEMM, k_tiles, GEMM["STAGES"]), seeds=150)


@pytest.mark.parametrize("n_tiles", [1, 2, 7])
def test_fa3_pipeline_is_safe(n_tiles):
    many_schedules(lambda w: fa3_agents(w, FA3, n_tiles, FA3["STAGES"]), seeds=150)


def test_model_catches_an_early_release():
    """Releasing a stage right after issue (no wait for the wgmma) lets the producer overwrite it."""
    with pytest.raises(Hazard):
        many_schedules(lambda w: gemm_agents(w, GEMM, 12, 2, early_release=True), seeds=200)


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
