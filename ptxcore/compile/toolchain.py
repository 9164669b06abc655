"""What a build uses, found once per process: the CUDA toolkit, the host compiler, tvm_ffi and the
knowledge-pack headers; the include roots a candidate may reach; the sandbox policy of an nvcc run."""

from __future__ import annotations

import functools
import os
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

from ptxcore.sandbox import POLICY_VERSION, Limits, SandboxPolicy, presets
from ptxcore.sass.tools import find_tool

SCRATCH = "/scratch"
MAX_FILE_BYTES = 256 << 20
"""Largest file an nvcc run may write (its .ii, .ptx, .cubin and .so are a few MB)."""
PACKS_ENV = "PTXBENCH_KNOWLEDGE_PACKS_DIR"


@dataclass(frozen=True)
class IncludeRoot:
    """A directory whose files a candidate may include; `label` names it machine-independently."""

    label: str
    path: str

    def relative(self, real: str) -> str | None:
        """`real` relative to this root, or None when outside it."""
        return real[len(self.path) + 1:] if real.startswith(self.path + "/") else None


@dataclass(frozen=True)
class Toolchain:
    """The build's tools and headers on this machine (all paths real, as seen inside the sandbox too)."""

    nvcc: str
    toolkit_root: str
    toolkit_version: str
    host_compiler: str
    tvm_ffi_version: str
    tvm_ffi_include: str
    tvm_ffi_lib: str
    pack_headers: tuple[str, ...]
    include_roots: tuple[IncludeRoot, ...]

    def version_parts(self) -> tuple[str, ...]:
        """Everything about the tools that goes into the cache key."""
        return (f"nvcc-{self.toolkit_version}", f"host-{self.host_compiler}", f"tvm_ffi-{self.tvm_ffi_version}",
                f"sandbox-policy-{POLICY_VERSION}")


def _run(cmd: list[str]) -> str:
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=60, env={**os.environ, "LC_ALL": "C"})
    return proc.stdout + proc.stderr


def _toolkit(nvcc: str) -> tuple[str, str]:
    """(toolkit root, release) from nvcc's own dry run (nvcc on PATH may be a wrapper script)."""
    here = re.search(r"^#\$ _HERE_=(\S+)", _run([nvcc, "--dryrun", "-c", "-x", "cu", "/dev/null"]), re.M)
    root = Path(here.group(1)).resolve().parent if here else Path(nvcc).resolve().parents[1]
    out = _run([str(root / "bin" / "nvcc"), "--version"])
    version = re.search(r"V(\d+\.\d+\.\d+)", out)
    return str(root), version.group(1) if version else out.strip().splitlines()[-1]


@functools.lru_cache(maxsize=4)
def toolkit_root_of(nvcc: str) -> str:
    """The CUDA toolkit folder of an nvcc (through wrapper scripts and links)."""
    return _toolkit(nvcc)[0]


def _host_compiler() -> tuple[str, tuple[str, ...]]:
    """(g++ version, g++'s standard include directories) - what nvcc's preprocessing passes use."""
    version = _run(["g++", "-dumpfullversion"]).strip()
    listing = _run(["g++", "-E", "-x", "c++", "-v", "/dev/null"])
    block = listing.split("#include <...> search starts here:", 1)[-1].split("End of search list.", 1)[0]
    dirs = tuple(str(Path(line.strip()).resolve()) for line in block.splitlines() if line.strip())
    return f"g++ {version}", tuple(d for d in dirs if Path(d).is_dir() and not d.startswith("/usr/local/"))


def _tvm_ffi() -> tuple[str, str, str]:
    import tvm_ffi
    import tvm_ffi.libinfo as libinfo

    include = Path(libinfo.find_include_path()).resolve()
    lib = Path(libinfo.find_libtvm_ffi()).resolve().parent
    return tvm_ffi.__version__, str(include), str(lib)


def pack_header_dirs(arch_key: str) -> tuple[str, ...]:
    """Knowledge-pack headers a candidate for `arch_key` may include: the architecture's, then common.
    (The pack root rule of ptxcore.prompts.packs.default_pack_root, without importing the prompt room.)"""
    env = os.environ.get(PACKS_ENV)
    root = Path(env) if env else Path(__file__).resolve().parents[2] / "knowledge_packs"
    dirs = (root / arch_key / "headers", root / "common" / "headers")
    return tuple(str(d.resolve()) for d in dirs if d.is_dir())


def toolchain(arch_key: str) -> Toolchain:
    """The toolchain for building candidates of `arch_key` on this machine (found once per nvcc)."""
    return _toolchain(find_tool("nvcc"), arch_key)


@functools.lru_cache(maxsize=8)
def _toolchain(nvcc: str, arch_key: str) -> Toolchain:
    root, version = _toolkit(nvcc)
    host, system_dirs = _host_compiler()
    tvm_version, tvm_include, tvm_lib = _tvm_ffi()
    packs = pack_header_dirs(arch_key)
    cuda_includes = sorted({str(p.resolve()) for p in Path(root).glob("targets/*/include")}
                           | ({str((Path(root) / "include").resolve())} if (Path(root) / "include").exists()
                              else set()))
    roots = (*(IncludeRoot("cuda", d) for d in cuda_includes), IncludeRoot("tvm_ffi", tvm_include),
             *(IncludeRoot(f"pack:{Path(d).parent.name}", d) for d in packs),
             *(IncludeRoot("system", d) for d in system_dirs))
    return Toolchain(nvcc=str(Path(root) / "bin" / "nvcc"), toolkit_root=root, toolkit_version=version,
                     host_compiler=host, tvm_ffi_version=tvm_version, tvm_ffi_include=tvm_include,
                     tvm_ffi_lib=tvm_lib, pack_headers=packs, include_roots=roots)


def compile_policy(tc: Toolchain, timeout_s: float, memory_limit_bytes: int) -> SandboxPolicy:
    """An nvcc run: the OS, the toolkit, tvm_ffi's headers and library and the pack headers, read-only."""
    mounts = (*presets.system_mounts(),
              *presets.tree_mounts([tc.toolkit_root, tc.tvm_ffi_include, tc.tvm_ffi_lib, *tc.pack_headers]))
    env = {"PATH": f"{tc.toolkit_root}/bin:/usr/bin:/bin", "HOME": SCRATCH, "TMPDIR": "/tmp", "LC_ALL": "C",
           "LANG": "C"}
    limits = Limits(address_space_bytes=memory_limit_bytes, cpu_time_s=int(timeout_s) + 30,
                    file_size_bytes=MAX_FILE_BYTES)
    return SandboxPolicy(name="compile", mounts=mounts, scratch_target=SCRATCH, env=env, limits=limits,
                         output_limit_bytes=4 << 20)
