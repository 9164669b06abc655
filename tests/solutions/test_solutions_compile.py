"""Every solution kernel: ABI against its definition, and a real Hopper compile with static SASS families.

The compile tests use the persistent content-addressed compile cache (PTXBENCH_CACHE_DIR or
~/.cache/ptxbench): the key covers source, flags, toolkit and ABI version, so a cached verdict is the
verdict nvcc gives; a cold run takes ~15 s per kernel on two cores.
"""

from __future__ import annotations

import re

import pytest

from ptxcore.arch import get_architecture
from ptxcore.compile import BuildOptions, CompileCache, compile_candidate
from ptxcore.problems import get_problem, load_catalog
from ptxcore.schema import CompileStatus, StaticTarget
from research.kernel_models.kernel_source import SOLUTIONS, kernel_id, library_kernels, uses_target_path

HOPPER = BuildOptions(arch=get_architecture("hopper"))
KERNELS = library_kernels()
IDS = [kernel_id(p) for p in KERNELS]


def run_params(source: str) -> list[str]:
    m = re.search(r"^void run\(([^)]*)\)", source, re.MULTILINE)
    assert m, "no `void run(...)` entry point"
    return [p.strip().split()[-1] for p in m.group(1).split(",")]


def test_library_covers_every_problem_of_the_catalog():
    """A TMA + wgmma kernel for each of the 16 problems; a generic one for GEMM and every MHA problem."""
    problems = {p.parent.name for p in KERNELS}
    assert problems == set(load_catalog())
    for name in problems:
        assert any(uses_target_path(p) for p in KERNELS if p.parent.name == name), f"{name}: no wgmma kernel"
        if not name.startswith("gqa_"):
            assert any(not uses_target_path(p) for p in KERNELS if p.parent.name == name), (
                f"{name}: no generic kernel"
            )


@pytest.mark.parametrize("path", KERNELS, ids=IDS)
def test_entry_point_matches_the_definition(path):
    """`run` takes the definition's inputs then outputs, in order and by name, and is exported."""
    definition = get_problem(path.parent.name).definition
    source = path.read_text()
    assert run_params(source) == [*definition.inputs.keys(), *definition.outputs.keys()]
    assert "TVM_FFI_DLL_EXPORT_TYPED_FUNC(run, run);" in source
    assert "TVMFFIEnvGetStream" in source, "kernels must launch on the caller's stream"
    assert not re.search(r"<<<[^>]*>>>", source.replace(", stream>>>", "")), "every launch names the stream"


CAUSAL_PAIRS = sorted(
    (p.parent.name, p.name) for p in KERNELS if (SOLUTIONS / f"{p.parent.name}_causal" / p.name).exists()
)


def test_every_causal_kernel_has_its_non_causal_twin():
    causal = {
        (p.parent.name.removesuffix("_causal"), p.name)
        for p in KERNELS
        if p.parent.name.endswith("_causal") and not p.parent.name.startswith("gqa_")
    }
    assert causal == set(CAUSAL_PAIRS) and len(CAUSAL_PAIRS) == 15  # 3 head dims x (3 forward + 2 backward kernels)


@pytest.mark.parametrize(("op", "name"), CAUSAL_PAIRS)
def test_causal_variant_differs_only_in_the_flag(op, name):
    """Generated twins: the same template, so only the stamped flag (and the problem name) differ."""
    plain, causal = SOLUTIONS / op / name, SOLUTIONS / f"{op}_causal" / name
    a = plain.read_text().replace(f"{op}_causal", op).splitlines()
    b = causal.read_text().replace(f"{op}_causal", op).splitlines()
    diff = [(x, y) for x, y in zip(a, b, strict=True) if x != y]
    assert diff == [("constexpr bool kCausal = false;", "constexpr bool kCausal = true;")]


@pytest.mark.slow
@pytest.mark.parametrize("path", KERNELS, ids=IDS)
def test_solution_compiles_for_hopper(path):
    compiled = compile_candidate(path.read_text(), HOPPER, CompileCache())
    result = compiled.result
    assert result.status is CompileStatus.COMPILED, result.log
    assert compiled.sass is not None
    if uses_target_path(path):
        assert compiled.sass.target_static is StaticTarget.PRESENT
        assert compiled.sass.family_counts.get("gmma", 0) > 0
        assert compiled.sass.family_counts.get("tma", 0) > 0, "the wgmma kernels load their tiles with TMA"
    else:
        assert compiled.sass.target_static is StaticTarget.ABSENT
    for k in result.resources.kernels:
        assert k.spill_store_bytes <= 64, f"{k.function}: {k.spill_store_bytes} B of spills"
