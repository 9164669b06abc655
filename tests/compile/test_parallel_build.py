"""nvcc's host and device chains side by side (`--threads`) and the device code read beside the gate: a successful
build leaves exactly what a sequential one does, a failed one is judged as a sequential one, a refused one keeps
nothing (real nvcc and cuobjdump; no GPU)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from ptxcore.arch import get_architecture
from ptxcore.compile import BuildOptions, CompileCache, compile_candidate
from ptxcore.compile import build as build_module
from ptxcore.compile.includes import PASS_FILES, SOURCE_NAME
from ptxcore.compile.nvcc import BUILD_THREADS, nvcc_command
from ptxcore.compile.toolchain import toolchain
from ptxcore.sass import dump_sass
from ptxcore.schema import CompileStatus

HOPPER = BuildOptions(arch=get_architecture("hopper"))
GATE_READS = (*PASS_FILES, "kernel.cudafe1.cpp", "kernel.cudafe1.stub.c", "kernel.cubin")
"""The keep files the gate reads (both preprocessed passes, cudafe++'s output) and the device image."""
HEAD = "#include <cstdint>\n#include <tvm/ffi/tvm_ffi.h>\n"
BODY = "__global__ void k(float* x) { x[threadIdx.x] = 1.f; }\n"


def _direct_build(tmp_path: Path, source: str, threads: int) -> dict[str, bytes]:
    """One unsandboxed nvcc build in `tmp_path/b` (the same path each time): the gate's inputs and the SASS."""
    work = tmp_path / "b"
    shutil.rmtree(work, ignore_errors=True)
    (work / "keep").mkdir(parents=True)
    (work / SOURCE_NAME).write_text(source)
    os.utime(work / SOURCE_NAME, (0, 0))
    cmd = nvcc_command(str(work / SOURCE_NAME), str(work / "kernel.so"), str(work / "keep"), HOPPER,
                       toolchain("hopper"), threads=threads)
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=work, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = {name: (work / "keep" / name).read_bytes() for name in GATE_READS}
    out["sass"] = dump_sass(work / "kernel.so").encode()
    return out


def test_the_build_runs_the_two_chains_side_by_side():
    cmd = nvcc_command("k.cu", "k.so", "keep", HOPPER, toolchain("hopper"))
    assert BUILD_THREADS > 1 and cmd[cmd.index("--threads") + 1] == str(BUILD_THREADS)
    assert "--threads" not in HOPPER.flags()  # scheduling only: not in the record or the cache key


@pytest.mark.slow
def test_a_parallel_build_leaves_what_a_sequential_one_does(fixtures_dir, tmp_path):
    source = (fixtures_dir / "kernels" / "wgmma_sm90.cu").read_text()
    sequential = _direct_build(tmp_path, source, threads=1)
    parallel = _direct_build(tmp_path, source, threads=BUILD_THREADS)
    assert [n for n in sequential if sequential[n] != parallel[n]] == []


FAILING = {
    "host error": HEAD + "#ifndef __CUDA_ARCH__\nint f() { return undefined_host_value; }\n#endif\n" + BODY,
    "device error": HEAD + "#ifdef __CUDA_ARCH__\n__device__ int g() { return undefined_dev_value; }\n#endif\n"
                    + BODY,
    "host header": "#ifndef __CUDA_ARCH__\n#include <no_such_header_here.h>\n#endif\n" + HEAD + BODY,
    "ptxas error": HEAD + '__global__ void k(float* x) { asm volatile("not.an.instruction;"); }\n',
}
SLOW_CASES = ("device error", "ptxas error")
"""Failures in the device chain, rebuilt like the others (`-m slow`); the host cases run by default: there a parallel
build leaves a device pass that a sequential one never wrote."""


@pytest.mark.parametrize("case", [pytest.param(c, marks=pytest.mark.slow) if c in SLOW_CASES else c for c in FAILING])
def test_a_failed_build_is_judged_as_a_sequential_one(case, tmp_path, monkeypatch):
    source = FAILING[case] + f"// {case} {tmp_path.name}\n"
    parallel = compile_candidate(source, HOPPER, CompileCache(tmp_path / "parallel")).result
    monkeypatch.setattr(build_module, "BUILD_THREADS", 1)
    sequential = compile_candidate(source, HOPPER, CompileCache(tmp_path / "sequential")).result
    assert parallel.status is CompileStatus.COMPILE_ERROR, (parallel.status, parallel.reason)
    same = ("status", "reason", "log", "cache_key", "resources")
    assert {k: getattr(parallel, k) for k in same} == {k: getattr(sequential, k) for k in same}


def test_a_refused_build_keeps_no_object(vendor_root, tmp_path):
    """The object is copied out (and read) before the gate refuses the build: nothing of it stays."""
    cache = CompileCache(tmp_path)
    c = compile_candidate("#define VENDOR <cublas_v2.h>\n#include VENDOR\n" + BODY, HOPPER, cache)
    assert c.result.status is CompileStatus.REJECTED and "cuBLAS" in c.result.reason, c.result.reason
    assert c.artifact is None and c.sass is None and c.result.cubin_sha256 is None
    assert not list(tmp_path.rglob("kernel.so")) and not list(tmp_path.glob("build-*"))
