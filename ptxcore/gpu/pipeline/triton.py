"""The tool stages of a Triton candidate: memcheck over the session's cubins, target-instruction evidence from the
cubins its calls launched (static SASS, then Nsight Compute on those kernels only), and the service's tool-only
tasks. The session itself is the CUDA one in mode triton (`CandidateSession`); `GpuJudge` sequences them.

Evidence: the launch report of the recorded first calls names each launched kernel's cubin in the candidate's
private Triton cache; `ptxcore.triton.evidence` reads and re-hashes those files here, in the judge's process, runs
the architecture's SASS families over them, and Nsight Compute counts `thread_inst_executed_true` over exactly those
kernels (`--kernel-name`). Cached by (source sha256, combined cubin sha256), like CUDA evidence.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from ptxcore.arch import Architecture
from ptxcore.gpu.harness.ncu import profile_target
from ptxcore.gpu.harness.triton import TritonFiles
from ptxcore.gpu.pipeline.caches import cache_key
from ptxcore.gpu.pipeline.tools import TOOL_SEED_OFFSET, ToolStages
from ptxcore.gpu.pipeline.verdicts import Verdict
from ptxcore.problems import Problem
from ptxcore.sass.credit import with_work
from ptxcore.sass.verdict import SassDumpError
from ptxcore.schema import StaticTarget, TargetInstruction, TargetInstructionEvidence
from ptxcore.triton.evidence import (
    EvidenceError,
    TritonStatic,
    binaries_from_launches,
    cache_kernels,
    combined_cubin_sha256,
    static_evidence,
)
from ptxcore.triton.validate import validate_triton_source

if TYPE_CHECKING:
    from ptxcore.gpu.pipeline.result import ResultBuilder

log = logging.getLogger(__name__)

NOT_PASSED = "not profiled: the candidate did not pass"


def not_profiled(why: str, source_sha256: str | None = None) -> TargetInstructionEvidence:
    """Unknown target evidence of a Triton candidate that was not profiled (its cubins exist only on the GPU)."""
    return TargetInstructionEvidence(status=TargetInstruction.UNKNOWN, reason=why, source_sha256=source_sha256)


def triton_memcheck(tools: ToolStages, files: TritonFiles, launches: dict, source_sha256: str, problem: Problem,
                    workload: str, result: ResultBuilder) -> Verdict | None:
    """The memcheck gate on the session's Triton cache; cached by source + the launched cubins' hashes."""
    cubins = combined_cubin_sha256([str(row.get("cubin_sha256", "")) for row in launches.get("steady", [])])
    key = cache_key("memcheck-triton-v1", source_sha256, cubins, problem.name, workload,
                    str(tools.config.sanitizer_calls))
    return tools.memcheck_run(key, files, problem, workload, result)


def _profile(tools: ToolStages, files: TritonFiles, source_sha256: str, problem: Problem, workload: str,
             arch: Architecture, names: list[str]) -> TargetInstructionEvidence:
    c = tools.config
    tools.ncu_logs.mkdir(parents=True, exist_ok=True)
    return profile_target(files, problem.name, workload, problem.extension.seed + TOOL_SEED_OFFSET, c.device, arch,
                          c.ncu_timeout_s, tools.ncu_logs / f"{source_sha256[:16]}.txt", kernel_names=names)


def _static_verdict(static: TritonStatic, source_sha256: str, ncu_enabled: bool) -> TargetInstructionEvidence | None:
    """ABSENT (or not profiled) evidence from the static SASS alone; None when ncu should run."""
    if static.report.target_static is StaticTarget.ABSENT:
        return TargetInstructionEvidence.from_static(
            static.report, "no target-family instruction in the SASS of the launched Triton kernels",
            source_sha256, static.cubin_sha256)
    if not ncu_enabled:
        return TargetInstructionEvidence.from_static(static.report, "not profiled: ncu disabled in the judge "
                                                     "configuration", source_sha256, static.cubin_sha256)
    return None


def triton_evidence(tools: ToolStages, files: TritonFiles, launches: dict, source_sha256: str, problem: Problem,
                    workload: str, arch: Architecture, result: ResultBuilder) -> TargetInstructionEvidence:
    """Target evidence of a passing Triton candidate, with its work share; `result.sass` becomes the launched
    cubins' SASS report."""
    ev = _triton_evidence(tools, files, launches, source_sha256, problem, workload, arch, result)
    return with_work(ev, problem, workload, arch)


def _triton_evidence(tools: ToolStages, files: TritonFiles, launches: dict, source_sha256: str, problem: Problem,
                     workload: str, arch: Architecture, result: ResultBuilder) -> TargetInstructionEvidence:
    try:
        binaries = binaries_from_launches(launches.get("steady", []), files.cache)
        static = static_evidence(binaries, arch)
    except (EvidenceError, SassDumpError, OSError) as exc:
        log.warning("no static evidence for Triton candidate %s: %s", source_sha256[:12], exc)
        return not_profiled(f"the launched Triton cubins could not be inspected: {exc}"[:500], source_sha256)
    result.sass = static.report
    early = _static_verdict(static, source_sha256, tools.config.ncu)
    if early is not None:
        return early
    hit = tools.evidence_cache.load(source_sha256, static.cubin_sha256)
    if hit is not None:
        return hit
    ev = _profile(tools, files, source_sha256, problem, workload, arch, sorted({b.name for b in binaries}))
    ev = ev.model_copy(update={"source_sha256": source_sha256, "cubin_sha256": static.cubin_sha256})
    tools.evidence_cache.store(ev)
    return ev


def triton_sanitize_only(tools: ToolStages, source: str, source_sha256: str, problem: Problem, workload: str,
                         result: ResultBuilder) -> Verdict | None:
    """The service's /sanitize for a Triton candidate: memcheck on a fresh private cache (no session ran)."""
    with TritonFiles.create(source) as files:
        key = cache_key("memcheck-triton-v1", source_sha256, "", problem.name, workload,
                        str(tools.config.sanitizer_calls))
        return tools.memcheck_run(key, files, problem, workload, result)


def triton_profile_only(tools: ToolStages, source: str, source_sha256: str, problem: Problem, workload: str,
                        arch: Architecture, result: ResultBuilder) -> TargetInstructionEvidence:
    """The service's /profile for a Triton candidate (no session, so no launch report): ncu over the source's own
    @triton.jit kernels, then the static SASS of every cubin that run compiled into the private cache."""
    ev = _triton_profile_only(tools, source, source_sha256, problem, workload, arch, result)
    return with_work(ev, problem, workload, arch)


def _triton_profile_only(tools: ToolStages, source: str, source_sha256: str, problem: Problem, workload: str,
                         arch: Architecture, result: ResultBuilder) -> TargetInstructionEvidence:
    if not tools.config.ncu:
        return not_profiled("not profiled: ncu disabled in the judge configuration", source_sha256)
    names = sorted(validate_triton_source(source).jit_kernels)
    with TritonFiles.create(source) as files:
        ev = _profile(tools, files, source_sha256, problem, workload, arch, names)
        try:
            binaries = [b for b in cache_kernels(files.cache) if b.name in names]
            static = static_evidence(binaries, arch)
        except (EvidenceError, SassDumpError, OSError) as exc:
            return not_profiled(f"no Triton cubin to inspect after the profiling run: {exc}"[:500], source_sha256)
    result.sass = static.report
    early = _static_verdict(static, source_sha256, ncu_enabled=True)
    if early is not None:
        return early
    return ev.model_copy(update={"source_sha256": source_sha256, "cubin_sha256": static.cubin_sha256})
