"""Proof that the wrappers are real: a kernel per architecture calls every wrapper of its pack, nvcc
compiles it for sm_90a / sm_100a, and the expected SASS families appear (CPU only, no GPU)."""

from __future__ import annotations

import re

import pytest

from ptxcore.arch import get_architecture
from ptxcore.compile import BuildOptions, compile_candidate
from ptxcore.prompts import expand_pack_includes, load_manifest
from ptxcore.sass import dump_sass, parse_sass
from ptxcore.schema import CompileStatus, Language, StaticTarget

from .conftest import KERNELS, PACKS

_DEF = re.compile(r"(?:PTXB_DEV|constexpr|inline CUresult)\s+[\w:<>]+\s+(\w+)\s*\(")
_WGMMA_TABLE = re.compile(r"^PTXB_WGMMA_BF16\((\d+),", re.MULTILINE)
_TMEM_TABLE = re.compile(r"^PTXB_TMEM_LDST\((\d+)\)", re.MULTILINE)


def wrapper_names(header_text: str) -> set[str]:
    """Every function a header defines, including the macro-generated wgmma / tcgen05.ld/st families."""
    names = set(_DEF.findall(header_text))
    for n in _WGMMA_TABLE.findall(header_text):
        names |= {f"wgmma_m64n{n}k16_ss", f"wgmma_m64n{n}k16_rs"}
    for n in _TMEM_TABLE.findall(header_text):
        names |= {f"tmem_ld_32x32b_x{n}", f"tmem_st_32x32b_x{n}"}
    if "struct PipeState" in header_text:
        names.add("PipeState")
    return names


def pack_headers(arch: str) -> list[str]:
    return [(PACKS / rel).read_text() for rel in load_manifest(arch, Language.CUDA).templates]


def exercise_source(arch: str) -> str:
    """The exercise kernel's own text (without the pack headers it includes)."""
    return (KERNELS / f"{arch}_all_wrappers.cu").read_text() + (KERNELS / "common_exercise.cuh").read_text()


def test_wgmma_table_covers_every_n_from_8_to_256():
    text = (PACKS / "hopper/headers/ptx_wgmma.cuh").read_text()
    assert [int(n) for n in _WGMMA_TABLE.findall(text)] == list(range(8, 257, 8))


def test_tcgen05_ld_st_table_covers_power_of_two_widths():
    text = (PACKS / "blackwell/headers/ptx_tcgen05.cuh").read_text()
    assert [int(n) for n in _TMEM_TABLE.findall(text)] == [1, 2, 4, 8, 16, 32, 64]


@pytest.mark.parametrize("arch", ["hopper", "blackwell"])
def test_exercise_kernel_calls_every_wrapper(arch):
    names = set().union(*(wrapper_names(h) for h in pack_headers(arch)))
    assert len(names) > 60, names
    body = exercise_source(arch)
    missing = sorted(n for n in names if not re.search(rf"\b{n}\b", body))
    assert not missing, f"{arch} exercise kernel does not call: {missing}"


def _compile(arch: str, cache):
    source = expand_pack_includes(KERNELS / f"{arch}_all_wrappers.cu")
    assert '#include "' not in source
    built = compile_candidate(source, BuildOptions(arch=get_architecture(arch)), cache)
    assert built.result.status is CompileStatus.COMPILED, built.result.log
    return built


def _opcodes(built) -> list[str]:
    return [ins.opcode for ins in parse_sass(dump_sass(built.artifact))]


@pytest.mark.slow
def test_hopper_pack_compiles_to_every_hgmma_shape_and_tma_form(cache):
    built = _compile("hopper", cache)
    assert built.sass.target_static is StaticTarget.PRESENT
    ops = _opcodes(built)
    shapes = {int(m.group(1)) for op in ops if (m := re.fullmatch(r"HGMMA\.64x(\d+)x16\.F32\.BF16", op))}
    assert shapes == set(range(8, 257, 8))
    mnemonics = {op.split(".")[0] for op in ops}
    expected = {
        "UTMALDG",
        "UTMASTG",
        "UTMAREDG",
        "UTMAPF",
        "UTMACCTL",
        "UBLKCP",
        "SYNCS",
        "USETMAXREG",
        "ELECT",
        "LDSM",
        "STSM",
        "LDGSTS",
        "REDG",
        "WARPGROUP",
        "UCGABAR_ARV",
        "UCGABAR_WAIT",
    }
    assert expected <= mnemonics, expected - mnemonics
    for dims in ("1D", "2D", "3D", "4D", "5D"):
        assert any(op.startswith(f"UTMALDG.{dims}") for op in ops), dims
    assert any("MULTICAST" in op for op in ops if op.startswith("UTMALDG"))


@pytest.mark.slow
def test_blackwell_pack_compiles_to_tcgen05_tensor_memory_and_2cta_tma(cache):
    built = _compile("blackwell", cache)
    assert built.sass.target_static is StaticTarget.PRESENT
    ops = _opcodes(built)
    mnemonics = {op.split(".")[0] for op in ops}
    expected = {
        "UTCHMMA",
        "UTCBAR",
        "UTCCP",
        "LDTM",
        "STTM",
        "UTCATOMSWS",
        "UTMALDG",
        "UTMASTG",
        "UTMAREDG",
        "SYNCS",
        "USETMAXREG",
        "ELECT",
        "STSM",
        "LDSM",
    }
    assert expected <= mnemonics, expected - mnemonics
    assert "UTCHMMA.2CTA" in ops
    assert any(op.startswith("UTCBAR") and "MULTICAST" in op for op in ops)
    assert any(op.startswith("UTMALDG") and "2CTA" in op for op in ops)
