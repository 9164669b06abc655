"""CPU check of solutions/gemm_n7168_k5120/wgmma_tma_epi_overlap.cu (research/kernels/gemm_n7168_k5120/
check_overlap.py, quick form): its barrier and staging protocol, with the previous tile's epilogue interleaved
into the next tile's first k-steps, holds under random interleavings for clusters of 1, 2 and 4, and the variant
without the store wait is caught."""

from __future__ import annotations

from pathlib import Path

from tests.scripts import load_script

SCRIPT = Path(__file__).resolve().parents[2] / "research" / "kernels" / "gemm_n7168_k5120" / "check_overlap.py"
CHECK = load_script(SCRIPT, "gemm_overlap_check")


def test_the_check_reads_the_library_kernel():
    assert CHECK.KERNEL.is_file() and CHECK.KERNEL.name == "wgmma_tma_epi_overlap.cu"
    assert CHECK.C["kClusterM"] == 2 and (CHECK.C["BM"], CHECK.BN, CHECK.STAGES, CHECK.CHUNKS) == (128, 256, 4, 4)


def test_the_overlapped_epilogue_protocol_holds_and_the_missing_store_wait_is_caught():
    assert CHECK.check_protocol(8) > 0
