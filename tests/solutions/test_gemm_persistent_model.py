"""CPU checks of solutions/gemm_n7168_k5120/wgmma_tma_persistent.cu (research/kernels/gemm_n7168_k5120/
check_schedule.py, quick form): the persistent tile schedule covers every tile once, the kernel's TMA / wgmma /
stmatrix index maths replayed through the hardware model give bf16(A @ B^T) at ragged shapes, and its mbarrier
and staging protocol holds under random interleavings while deliberately broken variants are caught."""

from __future__ import annotations

from pathlib import Path

from tests.scripts import load_script

SCRIPT = Path(__file__).resolve().parents[2] / "research" / "kernels" / "gemm_n7168_k5120" / "check_schedule.py"
CHECK = load_script(SCRIPT, "gemm_persistent_check")


def test_the_checks_read_the_library_kernel():
    assert CHECK.KERNEL.is_file() and CHECK.KERNEL.parent.name == "gemm_n7168_k5120"
    assert CHECK.C["kClusterM"] == 2 and (CHECK.BM, CHECK.BN, CHECK.BK) == (128, 256, 64)


def test_the_schedule_visits_every_tile_once():
    CHECK.check_schedule()


def test_the_barrier_protocol_holds_and_broken_variants_are_caught():
    CHECK.check_protocol(True)


def test_the_index_maths_replay_matches_the_reference():
    CHECK.check_replay(True)
