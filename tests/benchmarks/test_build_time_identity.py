"""benchmarks/build_time.py --check-sass compares device code with the module id taken out of anonymous-namespace
names (nvcc's and the two-chain build's differ there only); everything else must still count."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

from build_time import without_module_id  # noqa: E402

NVCC = b"_ZN36_GLOBAL__N__bcf69aae_4_k_cu_e9fed5f021gemm_tma_wgmma_kernelE14CUtensorMap_st"
OURS = b"_ZN41_GLOBAL__N__1c7b37e5_9_kernel_cu_9a1ed8ad21gemm_tma_wgmma_kernelE14CUtensorMap_st"
MANGLED_SUFFIX = b"_ZN34_GLOBAL__N__7dfa78bf_4_k_cu__Z1kPf3fooEv"


def test_the_module_id_is_the_only_part_taken_out():
    assert without_module_id(NVCC) == b"_ZN36" + b"N" * 36 + b"21gemm_tma_wgmma_kernelE14CUtensorMap_st"
    assert without_module_id(OURS) == b"_ZN41" + b"N" * 41 + b"21gemm_tma_wgmma_kernelE14CUtensorMap_st"
    assert without_module_id(MANGLED_SUFFIX) == b"_ZN34" + b"N" * 34 + b"3fooEv"  # nvcc's can end in a mangled name
    assert without_module_id(b"_ZN39_INTERNAL_5637850a_9_kernel_cu_95736c9b4f") == b"_ZN39" + b"N" * 39 + b"4f"


def test_a_different_kernel_name_or_instruction_still_differs():
    assert without_module_id(NVCC) != without_module_id(NVCC.replace(b"21gemm_tma_wgmma_kernel", b"21gemm_tma_wgmma_kerneX"))
    text = b"HGMMA.64x128x16.F32.BF16 R24, gdesc[UR4], RZ, !UPT ;"
    assert without_module_id(text) == text
