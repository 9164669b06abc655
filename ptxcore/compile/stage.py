"""The compile stage: forbidden-source check, cached nvcc build, ptxas report, static SASS verdict."""

from __future__ import annotations

import logging
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

from ptxcore.sass import inspect_binary
from ptxcore.sass.verdict import device_code_sha256
from ptxcore.schema import CompileResult, CompileStatus, SassReport, text_sha256

from .cache import ARTIFACT_FILE, CompileCache, cache_key
from .forbidden import find_forbidden
from .nvcc import BuildOptions, run_nvcc, toolkit_version, trim_log
from .ptxas import parse_ptxas

log = logging.getLogger(__name__)

SOURCE_FILE = "kernel.cu"


@dataclass(frozen=True)
class CompiledCandidate:
    """A compile result, the built shared object (when compiled) and its static SASS report."""

    result: CompileResult
    artifact: Path | None
    sass: SassReport | None


def file_sha256(path: Path) -> str:
    """sha256 of a file's bytes (the built shared object's identity)."""
    import hashlib

    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def source_sha256(source: str) -> str:
    """Identity of a candidate source (the project-wide text hash)."""
    return text_sha256(source)


def _abi_version() -> str:
    import tvm_ffi

    return f"tvm_ffi-{tvm_ffi.__version__}"


def _rejected(source: str, options: BuildOptions, reason: str) -> CompiledCandidate:
    result = CompileResult(
        status=CompileStatus.REJECTED, source_sha256=source_sha256(source), arch=options.arch.key,
        flags=options.flags(), reason=reason, log=reason,
    )
    return CompiledCandidate(result, None, None)


def _build(source: str, options: BuildOptions, key: str, cache: CompileCache) -> dict:
    workdir = cache.workdir()
    src = workdir / SOURCE_FILE
    src.write_text(source)
    run = run_nvcc(src, workdir / ARTIFACT_FILE, options)
    resources = parse_ptxas(run.log)
    if run.timed_out:
        status, reason = CompileStatus.COMPILE_ERROR, f"compile timed out after {options.timeout_s:.0f} s"
    elif run.returncode != 0:
        status, reason = CompileStatus.COMPILE_ERROR, "nvcc failed"
    else:
        status, reason = CompileStatus.COMPILED, ""
    result = CompileResult(
        status=status, source_sha256=source_sha256(source), arch=options.arch.key,
        flags=options.flags(), toolkit_version=toolkit_version(), log=trim_log(run.log, workdir),
        reason=reason, resources=resources, cache_key=key, duration_s=round(run.duration_s, 3),
    ).model_dump(mode="json")
    if run.timed_out:  # not deterministic: never cache
        shutil.rmtree(workdir, ignore_errors=True)
        return result
    if status is CompileStatus.COMPILED:
        report = inspect_binary(workdir / ARTIFACT_FILE, options.arch)
        (workdir / "sass.json").write_text(report.model_dump_json(indent=1))
        result["cubin_sha256"] = device_code_sha256(workdir / ARTIFACT_FILE)
        result["artifact_sha256"] = file_sha256(workdir / ARTIFACT_FILE)
    src.unlink()
    cache.publish(key, workdir, result)
    return result


def compile_candidate(
    source: str, options: BuildOptions, cache: CompileCache | None = None
) -> CompiledCandidate:
    """Compile one candidate (or serve it from the cache). A bad kernel is a verdict, not an exception."""
    started = time.monotonic()
    forbidden = find_forbidden(source)
    if forbidden is not None:
        return _rejected(source, options, forbidden.message())
    cache = cache or CompileCache()
    key = cache_key(source, options.flags(), toolkit_version(), _abi_version())
    hit = cache.load(key)
    if hit is None:
        with cache.locked(key):
            hit = cache.load(key)
            if hit is None:
                raw = _build(source, options, key, cache)
                hit = cache.load(key) or (raw, None)
                return _finish(hit, key, cache, cache_hit=False, started=started)
    return _finish(hit, key, cache, cache_hit=True, started=started)


def _finish(hit, key: str, cache: CompileCache, cache_hit: bool, started: float) -> CompiledCandidate:
    raw, artifact = hit
    result = CompileResult.model_validate({**raw, "cache_hit": cache_hit})
    if cache_hit:
        result = result.model_copy(update={"duration_s": round(time.monotonic() - started, 3)})
    sass_path = cache.entry(key) / "sass.json"
    sass = SassReport.model_validate_json(sass_path.read_text()) if sass_path.is_file() else None
    return CompiledCandidate(result, artifact, sass)
