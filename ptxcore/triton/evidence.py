"""Judge side: target-instruction evidence for a Triton candidate, from the cubins Triton compiled for it.

1. Which binaries: the launch report of the candidate's first calls (`LaunchRecorder.report`: kernel name +
   cubin sha256 + path inside the private cache) selects the cubins of the kernels that call launched; each file
   is read and hashed HERE, outside the candidate's process, and must match the reported sha256.
   `cache_kernels(cache_dir)` lists every cubin of the private cache (with its metadata) when no launch report
   exists (then autotuning configurations that never ran are included: weaker).
2. Static: the repository's SASS analysis on each cubin (`cuobjdump --dump-sass`, the architecture's families
   and exclusions) -> present/absent per kernel and one merged `SassReport`.
3. Dynamic: Nsight Compute exactly as for CUDA (`ptxcore.gpu.harness.ncu`), with `--kernel-name regex:^(k1|k2)$` so
   `thread_inst_executed_true` is summed over the Triton kernels of the one profiled call only:
   `with_kernel_filter(ncu_command(...), names)`.
4. Cache key: (source sha256, `combined_cubin_sha256` of the launched cubins' sha256s).
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
from dataclasses import dataclass
from pathlib import Path

from ptxcore.arch import Architecture
from ptxcore.sass.parse import parse_sass
from ptxcore.sass.verdict import classify, dump_sass
from ptxcore.schema import SassReport, StaticTarget

log = logging.getLogger(__name__)

MAX_CUBIN_BYTES = 64 << 20
MAX_CACHE_FILES = 2000
_KERNEL_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,255}")


class EvidenceError(RuntimeError):
    """A reported cubin is missing, oversized, outside the cache, or does not hash to what was reported."""


@dataclass(frozen=True)
class TritonBinary:
    """One cubin the judge read from the candidate's private cache."""

    name: str
    """Kernel name (the @triton.jit function's name)."""
    path: Path
    """The cubin file."""
    sha256: str
    """sha256 of its bytes, computed by the judge."""


@dataclass(frozen=True)
class TritonStatic:
    """Static SASS verdict over the launched Triton kernels."""

    report: SassReport
    """Merged report over every binary (families counted over all of them)."""
    per_kernel: dict[str, StaticTarget]
    """Kernel name -> present/absent (present when any binary of that name holds a required family)."""
    cubin_sha256: str
    """combined_cubin_sha256 of the binaries (the evidence cache key's second part)."""


def combined_cubin_sha256(shas: list[str] | tuple[str, ...] | set[str]) -> str:
    """One hash over a set of cubin hashes (order-free, duplicates ignored)."""
    return hashlib.sha256("\n".join(sorted(set(shas))).encode()).hexdigest()


def evidence_key(source_sha256: str, binaries: list[TritonBinary]) -> tuple[str, str]:
    """(source sha256, combined cubin sha256): the key `ptxcore.gpu.harness.ncu.EvidenceCache` takes."""
    return source_sha256, combined_cubin_sha256([b.sha256 for b in binaries])


def _inside(path: Path, root: Path) -> Path:
    resolved = path.resolve()
    if path.is_symlink() or not resolved.is_relative_to(root.resolve()):
        raise EvidenceError(f"cubin {path.name} is not a plain file inside the candidate's Triton cache")
    return resolved


def _read_cubin(path: Path) -> bytes:
    if not path.is_file():
        raise EvidenceError(f"cubin {path.name} is missing from the candidate's Triton cache")
    if path.stat().st_size > MAX_CUBIN_BYTES:
        raise EvidenceError(f"cubin {path.name} is larger than {MAX_CUBIN_BYTES >> 20} MiB")
    return path.read_bytes()


def binaries_from_launches(report: list[dict], cache_dir: Path) -> list[TritonBinary]:
    """The distinct cubins of a launch report (LaunchRecorder.report with cache_dir), verified by hash."""
    seen: dict[str, TritonBinary] = {}
    for row in report:
        name, sha, rel = str(row.get("name", "")), str(row.get("cubin_sha256", "")), str(row.get("cubin", ""))
        if not _KERNEL_NAME.fullmatch(name):
            raise EvidenceError(f"launch report names an invalid kernel {name[:60]!r}")
        if not sha or not rel:
            raise EvidenceError(f"launch of {name} has no recorded cubin (loaded before the recorder)")
        if sha in seen:
            continue
        path = _inside(cache_dir / rel, cache_dir)
        actual = hashlib.sha256(_read_cubin(path)).hexdigest()
        if actual != sha:
            raise EvidenceError(f"cubin of {name} does not match its reported sha256")
        seen[sha] = TritonBinary(name, path, actual)
    return sorted(seen.values(), key=lambda b: (b.name, b.sha256))


def cache_kernels(cache_dir: Path) -> list[TritonBinary]:
    """Every cubin in a Triton cache dir (`<hash>/<name>.cubin`, name from the `<name>.json` metadata)."""
    out: list[TritonBinary] = []
    files = sorted(cache_dir.glob("*/*.cubin"))
    if len(files) > MAX_CACHE_FILES:
        raise EvidenceError(f"the Triton cache holds more than {MAX_CACHE_FILES} cubins")
    for cubin in files:
        path = _inside(cubin, cache_dir)
        meta = path.with_suffix(".json")
        name = path.stem
        if meta.is_file() and meta.stat().st_size < 1 << 20:
            try:
                name = str(json.loads(meta.read_text()).get("name", name))
            except (ValueError, AttributeError):
                pass
        if _KERNEL_NAME.fullmatch(name):
            out.append(TritonBinary(name, path, hashlib.sha256(_read_cubin(path)).hexdigest()))
    return out


def static_evidence(binaries: list[TritonBinary], arch: Architecture) -> TritonStatic:
    """The SASS families of each launched kernel and of all of them together."""
    if not binaries:
        raise EvidenceError("no Triton kernel binary to inspect")
    per_kernel: dict[str, StaticTarget] = {}
    instructions = []
    for b in binaries:
        ins = parse_sass(dump_sass(b.path))
        instructions.extend(ins)
        verdict = classify(ins, arch).target_static
        if per_kernel.get(b.name) is not StaticTarget.PRESENT:
            per_kernel[b.name] = verdict
    report = classify(instructions, arch)
    log.info("triton static SASS: %s", {k: v.value for k, v in per_kernel.items()})
    return TritonStatic(report, per_kernel, combined_cubin_sha256([b.sha256 for b in binaries]))


def kernel_name_regex(names: list[str] | set[str]) -> str:
    """ncu's `--kernel-name` value matching exactly these kernels."""
    clean = sorted({n for n in names if _KERNEL_NAME.fullmatch(n)})
    if not clean:
        raise EvidenceError("no valid Triton kernel name to profile")
    return "regex:^(" + "|".join(clean) + ")$"


def with_kernel_filter(ncu_cmd: list[str], names: list[str] | set[str]) -> list[str]:
    """Insert `--kernel-name regex:^(...)$` right after the ncu executable (ncu options precede the program)."""
    return [ncu_cmd[0], "--kernel-name", kernel_name_regex(names), *ncu_cmd[1:]]


def foreign_kernels(call_kernel_names: list[str] | set[str], triton_names: list[str] | set[str]) -> list[str]:
    """Kernels CUPTI saw in a candidate call that are not Triton kernels the candidate launched (a torch or
    library fallback the static rules missed): non-empty -> the call did work outside Triton."""
    allowed = set(triton_names)
    return sorted({n for n in call_kernel_names if n not in allowed})
