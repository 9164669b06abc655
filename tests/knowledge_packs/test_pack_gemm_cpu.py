"""The pack-only GEMM (knowledge_packs/hopper/examples/gemm_tma_wgmma.cu) and the prompt's solution
example compile for their targets; the GEMM statically contains wgmma and TMA loads (CPU, no GPU)."""

from __future__ import annotations

import re

import pytest

from ptxcore.arch import get_architecture
from ptxcore.compile import BuildOptions, compile_candidate
from ptxcore.prompts import expand_pack_includes
from ptxcore.sass import dump_sass, parse_sass
from ptxcore.schema import CompileStatus, StaticTarget

from .conftest import PACKS

GEMM = PACKS / "hopper" / "examples" / "gemm_tma_wgmma.cu"
HOPPER = BuildOptions(arch=get_architecture("hopper"))


def gemm_source() -> str:
    return expand_pack_includes(GEMM)


def test_gemm_uses_only_pack_headers():
    text = GEMM.read_text()
    local = re.findall(r'^#include "([^"]+)"', text, flags=re.MULTILINE)
    assert local and all(inc.startswith(("../headers/", "../../common/headers/")) for inc in local)
    assert "asm" not in re.sub(r"//.*", "", text), "the example must get all PTX from the pack wrappers"
    source = gemm_source()
    for header in ("ptx_tma.cuh", "ptx_wgmma.cuh", "ptx_gmma_desc.cuh", "ptx_mbarrier.cuh", "ptx_sync.cuh"):
        assert f"// ---- begin {header} ----" in source


@pytest.mark.slow
def test_gemm_compiles_with_hgmma_and_tma_without_spills(cache):
    built = compile_candidate(gemm_source(), HOPPER, cache)
    assert built.result.status is CompileStatus.COMPILED, built.result.log
    assert built.sass.target_static is StaticTarget.PRESENT
    assert built.sass.family_counts["gmma"] >= 4 and built.sass.family_counts["tma"] >= 2
    (kernel,) = built.result.resources.kernels
    assert kernel.spill_store_bytes == 0 and kernel.spill_load_bytes == 0
    assert kernel.registers <= 168  # __launch_bounds__(384, 1): the setmaxnreg budget 24 + 2 x 240 fits
    ops = {ins.opcode for ins in parse_sass(dump_sass(built.artifact))}
    assert "HGMMA.64x256x16.F32.BF16" in ops and "UTMALDG.2D" in ops
    assert any(op.startswith("USETMAXREG") for op in ops)


def test_solution_example_compiles(cache):
    example = (PACKS / "shared" / "tvm_ffi_example.cu").read_text()
    built = compile_candidate(example, HOPPER, cache)
    assert built.result.status is CompileStatus.COMPILED, built.result.log
