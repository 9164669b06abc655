"""The device code read beside the gate (ptxcore.compile.devicecode): the same SASS report and device-code hash as
reading the finished object in line, and a refused build keeps nothing (real nvcc and cuobjdump; no GPU)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ptxcore.arch import get_architecture
from ptxcore.compile import BuildOptions, CompileCache, compile_candidate
from ptxcore.compile import stage as stage_module
from ptxcore.sass import inspect_binary
from ptxcore.sass.verdict import device_code_sha256
from ptxcore.schema import CompileStatus

HOPPER = BuildOptions(arch=get_architecture("hopper"))
BODY = "__global__ void k(float* x) { x[threadIdx.x] = 1.f; }\n"


def test_the_device_code_read_beside_the_gate_is_the_objects(fixtures_dir, tmp_path):
    source = (fixtures_dir / "kernels" / "wgmma_sm90.cu").read_text() + f"// {tmp_path.name}\n"
    c = compile_candidate(source, HOPPER, CompileCache(tmp_path))
    assert c.result.status is CompileStatus.COMPILED, c.result.log
    assert c.sass == inspect_binary(c.artifact, HOPPER.arch)
    assert c.result.cubin_sha256 == device_code_sha256(c.artifact)


def test_a_refused_build_keeps_no_object(vendor_root, tmp_path, monkeypatch):
    """The object is copied out (and its reading started) before the gate refuses the build: nothing stays."""
    started: list[Path] = []
    real = stage_module.DeviceCodeReader.start
    monkeypatch.setattr(stage_module.DeviceCodeReader, "start", lambda self, a: (started.append(a), real(self, a)))
    cache = CompileCache(tmp_path)
    c = compile_candidate("#define VENDOR <cublas_v2.h>\n#include VENDOR\n" + BODY, HOPPER, cache)
    assert c.result.status is CompileStatus.REJECTED and "cuBLAS" in c.result.reason, c.result.reason
    assert started, "the build succeeded, so its object was read beside the gate"
    assert c.artifact is None and c.sass is None and c.result.cubin_sha256 is None
    assert not list(tmp_path.rglob("kernel.so")) and not list(tmp_path.glob("build-*"))


# ---- the object read fatbinary by fatbinary (ptxcore.compile.fatbin): the same text as the whole object's ------

OTHER = "__global__ void sneaky_other(float* x) { x[threadIdx.x] = 42.f; }\n"


def _fatbin_array(tmp_path: Path, placement: str) -> str:
    """C++ text defining an array holding a real fatbinary of another kernel, placed by `placement`."""
    import subprocess

    from ptxcore.sass.tools import find_tool

    src = tmp_path / "other.cu"
    src.write_text(OTHER)
    out = tmp_path / "other.fatbin"
    subprocess.run([find_tool("nvcc"), "-fatbin", f"-gencode={HOPPER.arch.gencode}", "-o", str(out), str(src)],
                   check=True, capture_output=True, timeout=300)
    data = out.read_bytes()
    body = ",".join(str(b) for b in data)
    return (f'extern "C" __attribute__((used, aligned(8){placement})) const unsigned char hidden_blob[{len(data)}]'
            f" = {{{body}}};\n")


@pytest.mark.parametrize("placement", ['', ', section(".nv_fatbin")', ', section("__nv_relfatbin")',
                                       ', section(".nv_fatbin.more")', ', section(".data.rel.ro")'])
def test_a_fatbinary_of_the_candidates_own_is_reported_as_the_whole_object_shows_it(tmp_path, placement):
    """However a candidate places device code of its own in its object, the SASS report is the one of cuobjdump's
    dump of the whole object (in nvcc's section cuobjdump shows the extra kernel; elsewhere it does not)."""
    source = BODY + _fatbin_array(tmp_path, placement) + f"// {tmp_path.name}\n"
    c = compile_candidate(source, HOPPER, CompileCache(tmp_path / "cache"))
    assert c.result.status is CompileStatus.COMPILED, c.result.log
    assert c.sass == inspect_binary(c.artifact, HOPPER.arch)
    assert c.result.cubin_sha256 == device_code_sha256(c.artifact)
    if placement == ', section(".nv_fatbin")':
        assert any("sneaky_other" in name for name in c.sass.functions), c.sass.functions


def test_the_kernels_fatbinary_is_dumped_ahead_and_the_device_links_once(tmp_path, monkeypatch):
    """Two candidates with different device code in one process: each kernel fatbinary is dumped once, from the
    copy taken while the build ran; the device link's fatbinary (the same bytes in both) is dumped for the first
    only; both reports are the whole objects'."""
    from ptxcore.compile import devicecode

    dumped: list[str] = []
    real = devicecode.dump_sass
    monkeypatch.setattr(devicecode, "dump_sass", lambda path, *a: (dumped.append(path.name), real(path, *a))[1])
    monkeypatch.setattr(devicecode, "MEMO", devicecode.DumpMemo())
    per_build = []
    for i in range(2):
        source = BODY + f"__device__ int devicecode_test_{i} = {i};\n// {tmp_path.name} {i}\n"
        c = compile_candidate(source, HOPPER, CompileCache(tmp_path / f"cache{i}"))
        assert c.result.status is CompileStatus.COMPILED, c.result.log
        assert c.sass == inspect_binary(c.artifact, HOPPER.arch)
        per_build.append(list(dumped))
        dumped.clear()
    assert per_build == [["ahead-0.fatbin", "object-0.fatbin"], ["ahead-0.fatbin"]], per_build


@pytest.mark.parametrize("layout, plain", [
    ("two whole fatbinaries", True),
    ("padding to 8 bytes", True),
    ("padding that is not zero", False),
    ("a fatbinary cut short", False),
    ("bytes after the last one", False),
    ("a fatbinary at an odd offset", False),
    ("no magic", False),
])
def test_a_section_is_split_only_when_whole_fatbinaries_make_it_up(layout, plain):
    import struct

    from ptxcore.compile.fatbin import FATBIN_MAGIC, split_fatbins

    def blob(payload: bytes, magic: int = FATBIN_MAGIC) -> bytes:
        return struct.pack("<IHHQ", magic, 1, 16, len(payload)) + payload

    a, b, c = blob(b"A" * 8), blob(b"B" * 5), blob(b"C" * 8)
    sections = {
        "two whole fatbinaries": a + c,
        "padding to 8 bytes": b + b"\0" * 3 + a,
        "padding that is not zero": b + b"\0\1\0" + a,
        "a fatbinary cut short": a + b[:-2],
        "bytes after the last one": a + b"\0" * 8 + b"x",
        "a fatbinary at an odd offset": b + b"\0" * 4 + a,
        "no magic": blob(b"A" * 8, magic=0x12345678),
    }
    expected = {"two whole fatbinaries": [a, c], "padding to 8 bytes": [b, a]}
    assert split_fatbins(sections[layout]) == (expected[layout] if plain else None)
