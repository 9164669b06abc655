"""The pure-host parts of the packs (descriptor encoders, swizzle, TMEM addressing) against the PTX ISA
bit tables: a host program built with nvcc from the pack headers prints encodings; Python encodes the
same inputs field by field from the tables, and a few hand-computed constants pin the layouts."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from .conftest import PACKS

HOST_PROGRAM = r"""
#include <cstdio>
#include <cstdint>
#include "common/headers/ptx_sync.cuh"
#include "common/headers/ptx_mbarrier.cuh"
#include "common/headers/ptx_tma.cuh"
#include "hopper/headers/ptx_gmma_desc.cuh"
#include "blackwell/headers/ptx_tcgen05.cuh"
int main() {
  const uint32_t addrs[] = {0x0, 0x400, 0x1c00, 0x3fc00, 0x12340};
  const uint32_t offs[][2] = {{16, 1024}, {128, 256}, {8192, 1024}, {0x3fff0, 0x3fff0}};
  for (uint32_t a : addrs) for (auto& o : offs) for (uint32_t sw = 0; sw < 4; ++sw) for (uint32_t bo = 0; bo < 8; bo += 3)
    printf("gmma %u %u %u %u %u %llu\n", a, o[0], o[1], sw, bo,
           (unsigned long long)make_gmma_desc(a, o[0], o[1], (GmmaSwizzle)sw, bo));
  for (uint32_t a : addrs) for (uint32_t sw = 1; sw < 4; ++sw)
    printf("kmajor %u %u %llu\n", a, sw, (unsigned long long)gmma_desc_kmajor(a, (GmmaSwizzle)sw));
  const uint32_t usw[] = {0, 1, 2, 4, 6};
  for (uint32_t a : addrs) for (auto& o : offs) for (uint32_t sw : usw)
    printf("umma %u %u %u %u %llu\n", a, o[0], o[1], sw,
           (unsigned long long)make_umma_smem_desc(a, o[0], o[1], (UmmaSwizzle)sw, 0));
  const uint32_t shapes[][2] = {{64, 8}, {64, 256}, {128, 16}, {128, 256}, {256, 128}};
  for (auto& s : shapes) for (uint32_t ta = 0; ta < 2; ++ta) for (uint32_t tb = 0; tb < 2; ++tb)
    printf("idesc %u %u %u %u %u\n", s[0], s[1], ta, tb, make_umma_idesc_bf16(s[0], s[1], ta, tb));
  for (uint32_t o = 0; o < 4096; o += 16) for (uint32_t sw = 0; sw < 4; ++sw)
    printf("swz %u %u %u\n", o, sw, swizzle_offset(o, (GmmaSwizzle)sw));
  printf("tmem %u\n", tmem_addr(0x00100020u, 96, 7));
  printf("advance %llu\n", (unsigned long long)gmma_desc_advance(gmma_desc_kmajor(0x400, GMMA_SWIZZLE_128B), 96));
  return 0;
}
"""


def gmma_desc(addr: int, lbo: int, sbo: int, swizzle: int, base: int) -> int:
    """PTX ISA, wgmma matrix descriptor: 0-13 addr>>4, 16-29 LBO>>4, 32-45 SBO>>4, 49-51 base, 62-63 swizzle."""
    return (
        ((addr & 0x3FFFF) >> 4)
        | ((lbo >> 4) & 0x3FFF) << 16
        | ((sbo >> 4) & 0x3FFF) << 32
        | base << 49
        | swizzle << 62
    )


def umma_desc(addr: int, lbo: int, sbo: int, swizzle: int) -> int:
    """PTX ISA, tcgen05 shared memory descriptor: as above plus 46-48 = 0b001 and 61-63 swizzle."""
    return (
        ((addr & 0x3FFFF) >> 4)
        | ((lbo >> 4) & 0x3FFF) << 16
        | ((sbo >> 4) & 0x3FFF) << 32
        | 1 << 46
        | swizzle << 61
    )


def idesc(m: int, n: int, a_mn: int, b_mn: int) -> int:
    """PTX ISA, instruction descriptor for kind::f16: D=F32 (4-5), A=B=BF16 (7-9, 10-12), majors 15/16,
    N>>3 at 17-22, M>>4 at 24-28."""
    return 1 << 4 | 1 << 7 | 1 << 10 | a_mn << 15 | b_mn << 16 | (n >> 3) << 17 | (m >> 4) << 24


def swizzled(offset: int, mode: int) -> int:
    """PTX swizzle atoms: W-byte rows; 16-B chunk c of row r moves to c ^ f(r)."""
    width = {0: None, 1: 128, 2: 64, 3: 32}[mode]
    if width is None:
        return offset
    row, chunk, byte = offset // width, (offset % width) // 16, offset % 16
    f = {128: row % 8, 64: (row // 2) % 4, 32: (row // 4) % 2}[width]
    return row * width + (chunk ^ f) * 16 + byte


@pytest.fixture(scope="module")
def encodings(tmp_path_factory) -> list[list[str]]:
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        pytest.skip("nvcc not on PATH")
    tmp = tmp_path_factory.mktemp("desc")
    (tmp / "desc.cu").write_text(HOST_PROGRAM)
    cmd = [
        nvcc,
        "-std=c++17",
        "-gencode=arch=compute_100a,code=sm_100a",
        f"-I{PACKS}",
        "-o",
        str(tmp / "desc"),
        str(tmp / "desc.cu"),
    ]
    build = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert build.returncode == 0, build.stderr
    run = subprocess.run([str(tmp / "desc")], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    return [line.split() for line in run.stdout.splitlines()]


def rows(encodings, kind: str) -> list[list[int]]:
    out = [[int(x) for x in r[1:]] for r in encodings if r[0] == kind]
    assert out, kind
    return out


def test_gmma_descriptor_matches_ptx_bit_table(encodings):
    for addr, lbo, sbo, sw, base, got in rows(encodings, "gmma"):
        assert got == gmma_desc(addr, lbo, sbo, sw, base), (addr, lbo, sbo, sw, base)


def test_kmajor_helper_uses_8_row_sbo_and_unused_lbo(encodings):
    sbo = {1: 1024, 2: 512, 3: 256}
    for addr, sw, got in rows(encodings, "kmajor"):
        assert got == gmma_desc(addr, 16, sbo[sw], sw, 0)
    # The widely used 128B K-major encoding: (1 << 62) | (64 << 32) | (1 << 16) | (0x400 >> 4).
    assert [0x400, 1, 0x4000004000010040] in rows(encodings, "kmajor")


def test_umma_descriptor_has_version_bit_and_3_bit_swizzle(encodings):
    for addr, lbo, sbo, sw, got in rows(encodings, "umma"):
        assert got == umma_desc(addr, lbo, sbo, sw)
    assert [0x400, 16, 1024, 2, 0x4000404000010040] in rows(encodings, "umma")


def test_umma_instruction_descriptor(encodings):
    for m, n, a_mn, b_mn, got in rows(encodings, "idesc"):
        assert got == idesc(m, n, a_mn, b_mn)
    assert [128, 256, 0, 0, 0x08400490] in rows(encodings, "idesc")


def test_swizzle_offset_matches_swizzle_atoms(encodings):
    for off, mode, got in rows(encodings, "swz"):
        assert got == swizzled(off, mode), (off, mode)


def test_tmem_address_and_descriptor_advance(encodings):
    assert rows(encodings, "tmem") == [[0x00100020 + (96 << 16) + 7]]
    assert rows(encodings, "advance") == [[0x4000004000010040 + 96 // 16]]
