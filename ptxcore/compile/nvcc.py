"""The nvcc build command of docs/architecture.md and the scrubbing of its log for feedback.

One build for CPU and GPU hosts: no `-lcuda` (the CPU machines have no libcuda). The GPU host loads the very
same shared object after preloading libcuda with RTLD_GLOBAL, so driver-API symbols resolve at load time.
"""

from __future__ import annotations

import functools
import re
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from ptxcore.arch import Architecture
from ptxcore.sass.tools import find_tool

from .toolchain import SCRATCH, Toolchain

LOG_LIMIT_CHARS = 6000
GIB = 1 << 30
KEEP_DIR = "keep"


@dataclass(frozen=True)
class BuildOptions:
    """What to build for, and the build's limits."""

    arch: Architecture
    timeout_s: float = 300.0
    extra_flags: tuple[str, ...] = field(default_factory=tuple)
    memory_limit_bytes: int = 8 * GIB
    """Address-space limit of every process of the build (cicc, ptxas, gcc), bytes."""
    two_chains: bool = True
    """Run nvcc's host front end and device chain side by side (ptxcore.compile.plan); False: plain nvcc."""

    def flags(self) -> list[str]:
        """Machine-independent flags (no paths): part of the cache key and of the record."""
        flags = [
            "-shared", "-O3", "-lineinfo", "-Xptxas", "-v",
            f"-gencode={self.arch.gencode}", "-Xcompiler", "-fPIC", "-std=c++17", "-ltvm_ffi",
        ]
        return flags + list(self.extra_flags)


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


def nvcc_command(source: str, output: str, keep_dir: str, options: BuildOptions, tc: Toolchain) -> list[str]:
    """nvcc's command line with paths as the sandboxed process sees them; `--keep` leaves the preprocessed
    passes in `keep_dir` for the include and directive checks."""
    includes = [f"-I{d}" for d in (tc.tvm_ffi_include, *tc.pack_headers)]
    return [tc.nvcc, *options.flags(), *includes, f"-L{tc.tvm_ffi_lib}", "--keep", "--keep-dir", keep_dir,
            "-o", output, source]


def scrub_log(log: str, tc: Toolchain | None = None) -> str:
    """Local paths out of a compiler log: the sandbox's scratch, nvcc's temporaries, host-specific roots."""
    log = log.replace(f"{SCRATCH}/{KEEP_DIR}/", "").replace(SCRATCH + "/", "")
    log = re.sub(r"/tmp/tmpxft_[0-9a-f_-]+(\.[\w]+)+", "kernel.ptx", log)
    if tc is not None:
        for root in tc.include_roots:
            if root.label != "system" and root.label != "cuda":
                log = log.replace(root.path + "/", f"<{root.label}>/")
    return log


def trim_log(log: str, source_dir: Path | None = None, limit: int = LOG_LIMIT_CHARS) -> str:
    """Make a compiler log fit a feedback message: local paths removed, order kept, capped."""
    if source_dir is not None:
        log = log.replace(str(source_dir) + "/", "")
    log = scrub_log(log)
    text = "\n".join(ln.rstrip() for ln in log.splitlines() if ln.strip())
    if len(text) > limit:
        text = text[:limit] + f"\n... [{len(text) - limit} more characters trimmed]"
    return text
