"""The device code read beside the gate (ptxcore.compile.devicecode): the same SASS report and device-code hash as
reading the finished object in line, and a refused build keeps nothing (real nvcc and cuobjdump; no GPU)."""

from __future__ import annotations

from pathlib import Path

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
