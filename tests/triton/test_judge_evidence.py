"""The judge's Triton tool stages (ptxcore.gpu.pipeline.triton) over a real Triton cache compiled on the CPU:
target evidence from the launched cubins (static SASS, then ncu on exactly those kernels, cached by source +
cubin hash) and the memcheck cache key. Nsight Compute and compute-sanitizer are faked (no GPU here)."""

from __future__ import annotations

import pytest

from ptxcore.arch import get_architecture
from ptxcore.gpu.config import JudgeConfig
from ptxcore.gpu.harness.triton import TritonFiles
from ptxcore.gpu.pipeline import triton as stages
from ptxcore.gpu.pipeline.result import ResultBuilder
from ptxcore.gpu.pipeline.tools import ToolStages
from ptxcore.problems import get_problem
from ptxcore.schema import StaticTarget, TargetInstruction, TargetInstructionEvidence
from ptxcore.triton.evidence import cache_kernels

HOPPER = get_architecture("hopper")
GEMM = get_problem("gemm_n7168_k5120")
SHA = "5" * 64


def _report(cache, names):
    return {"steady": [{"name": b.name, "cubin_sha256": b.sha256, "cubin": str(b.path.relative_to(cache.resolve()))}
                       for b in cache_kernels(cache) if b.name in names]}


@pytest.fixture
def fake_ncu(monkeypatch):
    calls = []

    def profile(files, problem, workload, seed, device, arch, timeout_s, raw_log=None, kernel_names=None):
        calls.append((files, kernel_names))
        return TargetInstructionEvidence(status=TargetInstruction.EXECUTED, static=StaticTarget.PRESENT,
                                         family_thread_inst_executed={"gmma": 4096, "tma": 64}, tool="ncu (fake)")

    monkeypatch.setattr(stages, "profile_target", profile)
    return calls


def _setup(tmp_path, triton_cache, **config):
    files = TritonFiles(triton_cache.parent)  # <scratch>/triton-cache is the fixture's cache
    tools = ToolStages(tmp_path / "judge", JudgeConfig(cache_dir=tmp_path / "judge", **config))
    return files, tools, ResultBuilder(GEMM.name, "w", "hopper")


def test_launched_wgmma_kernel_is_profiled_alone_then_served_from_the_cache(tmp_path, triton_cache, fake_ncu):
    files, tools, r = _setup(tmp_path, triton_cache)
    launches = _report(triton_cache, {"tma_dot"})
    ev = stages.triton_evidence(tools, files, launches, SHA, GEMM, "w", HOPPER, r)
    assert ev.status is TargetInstruction.EXECUTED and ev.source_sha256 == SHA and len(ev.cubin_sha256) == 64
    assert fake_ncu == [(files, ["tma_dot"])]  # only the kernels the call launched
    assert r.sass.target_static is StaticTarget.PRESENT and "tma_dot" in r.sass.functions
    again = stages.triton_evidence(tools, files, launches, SHA, GEMM, "w", HOPPER, ResultBuilder(GEMM.name, "w", "h"))
    assert again == ev and len(fake_ncu) == 1
    other = stages.triton_evidence(tools, files, launches, "6" * 64, GEMM, "w", HOPPER, r)  # another source
    assert other.status is TargetInstruction.EXECUTED and len(fake_ncu) == 2


def test_a_kernel_without_target_families_is_absent_without_ncu(tmp_path, triton_cache, fake_ncu):
    files, tools, r = _setup(tmp_path, triton_cache)
    ev = stages.triton_evidence(tools, files, _report(triton_cache, {"plain_copy"}), SHA, GEMM, "w", HOPPER, r)
    assert ev.status is TargetInstruction.ABSENT and ev.static is StaticTarget.ABSENT and fake_ncu == []


def test_no_launch_or_a_forged_report_is_unknown_never_a_guess(tmp_path, triton_cache, fake_ncu):
    files, tools, r = _setup(tmp_path, triton_cache)
    assert stages.triton_evidence(tools, files, {"steady": []}, SHA, GEMM, "w", HOPPER, r).status \
        is TargetInstruction.UNKNOWN
    forged = _report(triton_cache, {"tma_dot"})
    forged["steady"][0]["cubin_sha256"] = "0" * 64
    ev = stages.triton_evidence(tools, files, forged, SHA, GEMM, "w", HOPPER, r)
    assert ev.status is TargetInstruction.UNKNOWN and "does not match" in ev.reason and fake_ncu == []


def test_ncu_disabled_keeps_the_static_verdict(tmp_path, triton_cache, fake_ncu):
    files, tools, r = _setup(tmp_path, triton_cache, ncu=False)
    ev = stages.triton_evidence(tools, files, _report(triton_cache, {"tma_dot"}), SHA, GEMM, "w", HOPPER, r)
    assert ev.status is TargetInstruction.UNKNOWN and ev.static is StaticTarget.PRESENT and fake_ncu == []


def test_memcheck_is_keyed_by_source_and_launched_cubins(tmp_path, triton_cache, monkeypatch):
    files, tools, r = _setup(tmp_path, triton_cache)
    keys = []
    monkeypatch.setattr(tools, "memcheck_run", lambda key, candidate, *a: keys.append((key, candidate)))
    stages.triton_memcheck(tools, files, _report(triton_cache, {"tma_dot"}), SHA, GEMM, "w", r)
    stages.triton_memcheck(tools, files, _report(triton_cache, {"plain_copy"}), SHA, GEMM, "w", r)
    stages.triton_memcheck(tools, files, _report(triton_cache, {"tma_dot"}), SHA, GEMM, "w", r)
    assert keys[0][1] is files and keys[0][0] != keys[1][0] and keys[0][0] == keys[2][0]
