"""The compile stage with the real nvcc and cuobjdump (CPU machine, no GPU, no libcuda)."""

from __future__ import annotations

import multiprocessing

import pytest

from ptxcore.arch import get_architecture
from ptxcore.compile import BuildOptions, CompileCache, compile_candidate
from ptxcore.compile import stage as stage_module
from ptxcore.schema import CompileStatus, StaticTarget

HOPPER = BuildOptions(arch=get_architecture("hopper"))
BLACKWELL = BuildOptions(arch=get_architecture("blackwell"))


def kernel(fixtures_dir, name: str) -> str:
    return (fixtures_dir / "kernels" / name).read_text()


def test_wgmma_kernel_has_static_hgmma(fixtures_dir, cache):
    c = compile_candidate(kernel(fixtures_dir, "wgmma_sm90.cu"), HOPPER, cache)
    assert c.result.status is CompileStatus.COMPILED, c.result.log
    assert c.artifact is not None and c.artifact.is_file()
    assert c.sass.target_static is StaticTarget.PRESENT
    assert c.sass.family_counts["gmma"] >= 1 and c.sass.counts["HGMMA"] >= 1
    assert c.result.resources.kernels and c.result.resources.kernels[0].arch == "sm_90a"
    assert len(c.result.cubin_sha256) == 64 and "-gencode=arch=compute_90a,code=sm_90a" in c.result.flags


def test_tcgen05_kernel_has_utc_and_ldtm_for_sm100a(fixtures_dir, cache):
    c = compile_candidate(kernel(fixtures_dir, "tcgen05_sm100.cu"), BLACKWELL, cache)
    assert c.result.status is CompileStatus.COMPILED, c.result.log
    assert c.sass.target_static is StaticTarget.PRESENT
    assert c.sass.counts.get("LDTM", 0) >= 1
    assert any(m.startswith("UTC") for m in c.sass.counts)


def test_commit_closing_dummy_hgmma_reads_absent(fixtures_dir, cache):
    c = compile_candidate(kernel(fixtures_dir, "dummy_gmma_sm90.cu"), HOPPER, cache)
    assert c.result.status is CompileStatus.COMPILED, c.result.log
    assert c.sass.counts.get("HGMMA", 0) == 1, "ptxas emitted the dummy"
    assert c.sass.target_static is StaticTarget.ABSENT
    assert len(c.sass.excluded) == 1 and "gdesc[URZ]" in c.sass.excluded[0]


def test_tma_prefetch_alone_reads_absent(fixtures_dir, cache):
    c = compile_candidate(kernel(fixtures_dir, "tma_prefetch_only_sm90.cu"), HOPPER, cache)
    assert c.result.status is CompileStatus.COMPILED, c.result.log
    assert c.sass.counts.get("UTMAPF", 0) >= 1
    assert c.sass.target_static is StaticTarget.ABSENT


def test_cublas_include_is_rejected_without_running_nvcc(fixtures_dir, cache, monkeypatch):
    def no_nvcc(*args, **kwargs):
        raise AssertionError("nvcc must not run for a rejected source")

    monkeypatch.setattr(stage_module, "sandboxed_build", no_nvcc)
    c = compile_candidate(kernel(fixtures_dir, "cublas_include.cu"), HOPPER, cache)
    assert c.result.status is CompileStatus.REJECTED
    assert "cuBLAS" in c.result.reason and c.artifact is None and c.sass is None


def test_syntax_error_gives_compile_error_with_the_message(fixtures_dir, cache):
    c = compile_candidate(kernel(fixtures_dir, "syntax_error.cu"), HOPPER, cache)
    assert c.result.status is CompileStatus.COMPILE_ERROR
    assert 'identifier "undeclared_value" is undefined' in c.result.log
    assert "kernel.cu(" in c.result.log and "/tmp/" not in c.result.log
    assert c.artifact is None


def test_cache_hit_runs_no_nvcc(fixtures_dir, cache, monkeypatch):
    source = kernel(fixtures_dir, "wgmma_sm90.cu")
    first = compile_candidate(source, HOPPER, cache)

    def no_nvcc(*args, **kwargs):
        raise AssertionError("cache hit must not run nvcc")

    monkeypatch.setattr(stage_module, "sandboxed_build", no_nvcc)
    again = compile_candidate(source, HOPPER, cache)
    assert again.result.cache_hit and again.result.status is CompileStatus.COMPILED
    assert again.result.cubin_sha256 == first.result.cubin_sha256
    assert again.sass == first.sass
    other_flags = BuildOptions(arch=HOPPER.arch, extra_flags=("-DVARIANT=1",))
    with pytest.raises(AssertionError, match="must not run nvcc"):
        compile_candidate(source, other_flags, cache)  # different flags: a different cache key


def _compile_in_child(args) -> tuple[str, bool]:
    root, source = args
    c = compile_candidate(source, HOPPER, CompileCache(root))
    return c.result.status.value, c.result.cache_hit


@pytest.mark.slow
def test_concurrent_compiles_of_one_source_build_once(fixtures_dir, tmp_path):
    source = kernel(fixtures_dir, "dummy_gmma_sm90.cu") + "\n// concurrency test\n"
    with multiprocessing.get_context("spawn").Pool(2) as pool:
        results = pool.map(_compile_in_child, [(str(tmp_path), source)] * 2)
    assert [r[0] for r in results] == ["COMPILED", "COMPILED"]
    assert sorted(r[1] for r in results) == [False, True], "exactly one process ran nvcc"
    entries = [p for p in tmp_path.glob("*/*") if p.is_dir()]
    assert len(entries) == 1 and not list(tmp_path.glob("build-*"))
