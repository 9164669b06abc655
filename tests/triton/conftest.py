"""Fixtures of the Triton tests: a real Triton cache with cubins compiled on the CPU (no GPU needed).

`triton.compile(ASTSource(fn, signature, constexprs), target=GPUTarget("cuda", 90, 32))` runs Triton's whole
pipeline (front end, MLIR, LLVM, the bundled ptxas) for sm_90a without a driver. Tests that need it skip when
triton is not installed (it is the optional `triton` extra).
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
KERNELS = REPO / "tests" / "fixtures" / "triton_kernels.py"


def import_file(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def compile_for_hopper(fn, signature: dict, constexprs: dict, num_warps: int = 4, num_stages: int = 3,
                       divisible: tuple[int, ...] = ()):
    """Compile one @triton.jit function for sm_90a on the CPU; the CompiledKernel (cubin in .asm['cubin'])."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    attrs = {(i,): [["tt.divisibility", 16]] for i in divisible}
    src = ASTSource(fn, signature, constexprs, attrs)
    return triton.compile(src, target=GPUTarget("cuda", 90, 32),
                          options={"num_warps": num_warps, "num_stages": num_stages})


@pytest.fixture(scope="session")
def triton_cache(tmp_path_factory) -> Path:
    """A private Triton cache holding two compiled kernels: `tma_dot` (TMA + tl.dot) and `plain_copy`."""
    pytest.importorskip("triton")
    from ptxcore.triton.loader import configure_cache

    cache = tmp_path_factory.mktemp("scratch") / "triton-cache"
    configure_cache(cache)
    mod = import_file(KERNELS, "ptxbench_test_triton_kernels")
    compile_for_hopper(mod.tma_dot, {"a_ptr": "*bf16", "c_ptr": "*bf16", "M": "i32", "K": "i32",
                                     "BM": "constexpr", "BK": "constexpr"}, {"BM": 128, "BK": 64},
                       num_warps=8, divisible=(0, 1, 2, 3))
    compile_for_hopper(mod.plain_copy, {"x_ptr": "*fp32", "y_ptr": "*fp32", "n": "i32", "BLOCK": "constexpr"},
                       {"BLOCK": 1024})
    return cache
