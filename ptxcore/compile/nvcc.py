"""The nvcc build command of ARCHITECTURE.md and a one-shot runner with a timeout."""

from __future__ import annotations

import functools
import re
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from ptxcore.arch import Architecture
from ptxcore.sass.tools import find_tool

LOG_LIMIT_CHARS = 6000


@dataclass(frozen=True)
class BuildOptions:
    """What to build for. `link_cuda` only where the driver exists (the GPU host)."""

    arch: Architecture
    link_cuda: bool = False
    timeout_s: float = 300.0
    extra_flags: tuple[str, ...] = field(default_factory=tuple)

    def flags(self) -> list[str]:
        """Machine-independent flags (no paths): part of the cache key and of the record."""
        flags = [
            "-shared", "-O3", "-lineinfo", "-Xptxas", "-v",
            f"-gencode={self.arch.gencode}", "-Xcompiler", "-fPIC", "-std=c++17", "-ltvm_ffi",
        ]
        if self.link_cuda:
            flags.append("-lcuda")
        return flags + list(self.extra_flags)


@dataclass(frozen=True)
class NvccRun:
    """Raw outcome of one nvcc invocation."""

    returncode: int | None
    log: str
    duration_s: float
    timed_out: bool


def tvm_ffi_paths() -> tuple[str, str]:
    """(include dir, lib dir) of the installed apache-tvm-ffi."""
    import tvm_ffi.libinfo as libinfo

    include = Path(libinfo.find_include_path())
    lib = Path(libinfo.find_libtvm_ffi()).parent
    return str(include), str(lib)


@functools.lru_cache(maxsize=1)
def toolkit_version() -> str:
    """nvcc's release, e.g. 13.0.88."""
    out = subprocess.run([find_tool("nvcc"), "--version"], capture_output=True, text=True, timeout=60)
    m = re.search(r"V(\d+\.\d+\.\d+)", out.stdout)
    return m.group(1) if m else out.stdout.strip().splitlines()[-1]


def nvcc_command(source: Path, output: Path, options: BuildOptions) -> list[str]:
    include, lib = tvm_ffi_paths()
    return [find_tool("nvcc"), *options.flags(), f"-I{include}", f"-L{lib}", "-o", str(output), str(source)]


def run_nvcc(source: Path, output: Path, options: BuildOptions) -> NvccRun:
    """Run nvcc; never raises for a bad kernel (only for a missing toolchain)."""
    cmd = nvcc_command(source, output, options)
    start = time.monotonic()
    try:
        proc = subprocess.run(
            cmd, capture_output=True, text=True, timeout=options.timeout_s, cwd=source.parent
        )
    except subprocess.TimeoutExpired as exc:
        text = (exc.stdout or b"").decode(errors="replace") if isinstance(exc.stdout, bytes) else (exc.stdout or "")
        return NvccRun(None, text, time.monotonic() - start, True)
    log = (proc.stdout or "") + (proc.stderr or "")
    return NvccRun(proc.returncode, log, time.monotonic() - start, False)


def trim_log(log: str, source_dir: Path | None = None, limit: int = LOG_LIMIT_CHARS) -> str:
    """Make a compiler log fit a feedback message: local paths removed, order kept, capped."""
    if source_dir is not None:
        log = log.replace(str(source_dir) + "/", "")
    log = re.sub(r"/tmp/tmpxft_[0-9a-f_-]+(\.[\w]+)+", "kernel.ptx", log)
    text = "\n".join(ln.rstrip() for ln in log.splitlines() if ln.strip())
    if len(text) > limit:
        text = text[:limit] + f"\n... [{len(text) - limit} more characters trimmed]"
    return text
