"""The compile stage: source checks, verified cache, sandboxed nvcc build with its include/directive gate,
ptxas report, static SASS verdict. A bad kernel is a verdict; only a broken machine raises."""

from __future__ import annotations

import logging
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

from ptxcore.sandbox import sandbox_disabled
from ptxcore.schema import CompileResult, CompileStatus, SandboxMode, SassReport, text_sha256

from .build import BuildOutcome, sandboxed_build
from .cache import CachedBuild, CompileCache, cache_key, file_sha256
from .devicecode import DeviceCodeReader
from .forbidden import source_rejection
from .includes import dependency_digest
from .nvcc import BuildOptions, trim_log
from .ptxas import parse_ptxas
from .toolchain import Toolchain, toolchain

log = logging.getLogger(__name__)

STAGE_VERSION = "compile-stage-4"
"""Bumped when the checks that decide a verdict change (part of the cache key)."""


@dataclass(frozen=True)
class CompiledCandidate:
    """A compile result, the built shared object (when compiled) and its static SASS report."""

    result: CompileResult
    artifact: Path | None
    sass: SassReport | None


def source_sha256(source: str) -> str:
    """Identity of a candidate source (the project-wide text hash)."""
    return text_sha256(source)


def lookup_key(source: str, options: BuildOptions, tc: Toolchain) -> str:
    """Where a build of `source` is looked up: source, flags, tools, sandbox policy and mode, memory limit
    (a build that ran out of memory is a deterministic COMPILE_ERROR at that limit). The result's
    cache_key adds the content of every header the build entered (see build_key)."""
    mode = SandboxMode.UNSANDBOXED if sandbox_disabled() else SandboxMode.BWRAP
    return cache_key(source, options.flags(), *tc.version_parts(), STAGE_VERSION, mode.value,
                     f"memory-{options.memory_limit_bytes}", "nvcc-two-chains" if options.two_chains else "nvcc")


def build_key(lookup: str, outcome: BuildOutcome) -> str:
    """The content address of a build: its lookup key plus the digest of the headers it entered."""
    return cache_key(lookup, [], "deps", dependency_digest(outcome.deps))


def _rejected(source: str, options: BuildOptions, reason: str) -> CompiledCandidate:
    result = CompileResult(
        status=CompileStatus.REJECTED, source_sha256=source_sha256(source), arch=options.arch.key,
        flags=options.flags(), reason=reason, log=reason,
    )
    return CompiledCandidate(result, None, None)


def compile_candidate(
    source: str, options: BuildOptions, cache: CompileCache | None = None
) -> CompiledCandidate:
    """Compile one candidate (or serve it from the cache). A bad kernel is a verdict, not an exception;
    SandboxUnavailableError when this machine cannot sandbox nvcc."""
    started = time.monotonic()
    reason = source_rejection(source)
    if reason is not None:
        return _rejected(source, options, reason)
    cache = cache or CompileCache()
    tc = toolchain(options.arch.key)
    key = lookup_key(source, options, tc)
    hit = cache.lookup(key)
    if hit is None:
        with cache.locked(key):
            hit = cache.lookup(key, remove_bad=True)
            if hit is None:
                return _build(source, options, tc, key, cache, started)
    return _served(hit, started)


def _imports_gate(built: BuildOutcome) -> BuildOutcome:
    """REJECTED when the built object imports the Python C API or CUPTI (ptxcore.compile.symbols)."""
    from dataclasses import replace

    from .symbols import ElfReadError, forbidden_import

    try:
        reason = forbidden_import(built.artifact)
    except (ElfReadError, OSError) as exc:
        reason = f"the built object cannot be read ({exc})"
    if reason is None:
        return built
    built.artifact.unlink(missing_ok=True)  # a rejected build's object is never kept
    return replace(built, status=CompileStatus.REJECTED, reason=reason, log="", artifact=None)


def _served(hit: CachedBuild, started: float) -> CompiledCandidate:
    result = hit.result.model_copy(update={"cache_hit": True,
                                           "duration_s": round(time.monotonic() - started, 3)})
    return CompiledCandidate(result, hit.artifact, hit.sass)


def _build(source: str, options: BuildOptions, tc: Toolchain, key: str, cache: CompileCache,
           started: float) -> CompiledCandidate:
    staging: Path | None = cache.staging()
    try:
        remaining = options.timeout_s - (time.monotonic() - started)
        with DeviceCodeReader() as reader:
            built = sandboxed_build(source, options, tc, staging, remaining, on_object=reader.start,
                                    on_fatbin=reader.prefetch)
            sass, cubin, artifact_sha = None, None, None
            if built.status is CompileStatus.COMPILED:
                built = _imports_gate(built)
            if built.status is CompileStatus.COMPILED:
                artifact_sha = file_sha256(built.artifact)
                sass, cubin = _static_sass(reader, options)
        rejected = built.status is CompileStatus.REJECTED
        result = CompileResult(
            status=built.status, source_sha256=source_sha256(source), arch=options.arch.key,
            flags=options.flags(), toolkit_version=tc.toolkit_version,
            log=built.reason if rejected else trim_log(built.log), reason=built.reason,
            resources=parse_ptxas("" if rejected else built.log), cache_key=build_key(key, built),
            cubin_sha256=cubin, artifact_sha256=artifact_sha, duration_s=round(time.monotonic() - started, 3),
            sandbox=built.mode,
        )
        if not built.cacheable:  # a deadline or limit was hit, or a pass never completed
            log.info("compile result not cached (%s)", built.reason or built.status.value)
            return CompiledCandidate(result, None, None)
        entry = cache.publish(key, staging, result, built.deps, sass)
        staging = None
        artifact = entry / built.artifact.name if built.artifact is not None else None
        return CompiledCandidate(result, artifact, sass)
    finally:
        if staging is not None:
            shutil.rmtree(staging, ignore_errors=True)


def _static_sass(reader: DeviceCodeReader, options: BuildOptions) -> tuple[SassReport, str]:
    """The static SASS report and device-code hash of a COMPILED build (read since the object existed)."""
    return reader.report(options.arch)
