"""The imports gate: a build whose host code calls into the Python C API or CUPTI is REJECTED."""

from __future__ import annotations

from pathlib import Path

from ptxcore.arch import get_architecture
from ptxcore.compile import BuildOptions, CompileCache, compile_candidate
from ptxcore.compile.symbols import ElfReadError, forbidden_import, undefined_symbols
from ptxcore.schema import CompileStatus

HOSTILE = Path(__file__).resolve().parents[1] / "fixtures" / "hostile"
CONTROLS = Path(__file__).resolve().parents[1] / "fixtures" / "controls"
HOPPER = get_architecture("hopper")


def test_timer_patch_through_the_python_c_api_is_rejected(compile_cache_dir):
    r = compile_candidate((HOSTILE / "h10_timer_patch.cu").read_text(), BuildOptions(HOPPER),
                          CompileCache(compile_cache_dir / "compile"))
    assert r.result.status is CompileStatus.REJECTED and "Python C API (PyRun_SimpleString" in r.result.reason
    assert r.artifact is None


def test_an_honest_build_imports_nothing_forbidden(compile_cache_dir):
    r = compile_candidate((CONTROLS / "01_gemm_cuda_core.cu").read_text(), BuildOptions(HOPPER),
                          CompileCache(compile_cache_dir / "compile"))
    assert r.result.status is CompileStatus.COMPILED
    names = undefined_symbols(r.artifact)
    assert "TVMFFIEnvGetStream" in names and forbidden_import(r.artifact) is None


def test_not_an_elf_is_an_error_not_a_pass(tmp_path):
    bad = tmp_path / "kernel.so"
    bad.write_bytes(b"\x7fELF" + b"\0" * 12)
    try:
        forbidden_import(bad)
    except ElfReadError as exc:
        assert "kernel.so" in str(exc)
    else:
        raise AssertionError("a malformed object must not pass the gate")
