"""Building blocks of policies: the read-only OS, a CUDA toolkit, a Python, GPU device nodes, driver libraries.

Nothing of the user's home, the caches, the warehouse, MLflow, the problem catalog or /etc is mounted by
these; a stage adds exactly the paths it needs (read-only).
"""

from __future__ import annotations

import glob
import os
import sys
from collections.abc import Iterable
from pathlib import Path

from .models import Limits, Mount, MountKind, RunAs, SandboxPolicy, ro

MERGED_USR_LINKS = ("/bin", "/sbin", "/lib", "/lib64", "/lib32", "/libx32")
GPU_DEVICE_GLOBS = ("/dev/nvidiactl", "/dev/nvidia[0-9]*", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools",
                    "/dev/nvidia-modeset", "/dev/nvidia-caps/nvidia-cap*")
DRIVER_LIB_GLOBS = ("libcuda.so*", "libnvidia-ml.so*", "libnvidia-ptxjitcompiler.so*", "libnvidia-nvvm.so*",
                    "libnvidia-gpucomp.so*", "libcudadebugger.so*")
DRIVER_LIB_DIRS = ("/usr/lib/x86_64-linux-gnu", "/usr/lib64", "/usr/lib", "/lib/x86_64-linux-gnu",
                   "/usr/local/nvidia/lib64", "/usr/local/cuda/compat", "/usr/lib/wsl/lib")


def system_mounts() -> tuple[Mount, ...]:
    """The OS read-only: /usr without /usr/local (hidden by an empty tmpfs), /bin /lib ... as on the host
    (symlinks into /usr on merged-/usr systems), and the dynamic loader's cache."""
    mounts = [ro("/usr"), Mount(kind=MountKind.TMPFS, target="/usr/local")]
    for top in MERGED_USR_LINKS:
        path = Path(top)
        if path.is_symlink():
            mounts.append(Mount(kind=MountKind.SYMLINK, target=top, source=os.readlink(path)))
        elif path.is_dir():
            mounts.append(ro(top))
    mounts.append(ro("/etc/ld.so.cache", optional=True))
    return tuple(mounts)


def tree_mounts(paths: Iterable[str | Path]) -> tuple[Mount, ...]:
    """Read-only binds of existing host paths at the same place (symlinked paths: their real target, and
    the link itself when it lies under a hidden directory such as /usr/local)."""
    out: list[Mount] = []
    for raw in paths:
        path = Path(raw)
        if not path.exists():
            continue
        real = str(path.resolve())
        out.append(ro(real))
        if str(path.absolute()) != real and path.is_symlink():
            out.append(Mount(kind=MountKind.SYMLINK, target=str(path.absolute()), source=os.readlink(path)))
    return tuple(_dedupe(out))


def python_mounts(extra: Iterable[str | Path] = ()) -> tuple[Mount, ...]:
    """What this Python needs to run inside: its installation and virtualenv prefixes (read-only), plus
    `extra` paths (package directories; never a whole repository with its runs and caches)."""
    exe = Path(sys.executable).resolve()
    prefixes = {sys.base_prefix, sys.prefix, str(exe.parents[1])}
    return tree_mounts([*sorted(prefixes), *extra])


def gpu_device_mounts() -> tuple[Mount, ...]:
    """The NVIDIA device nodes present on this host (--dev-bind; none on a CPU machine)."""
    nodes = sorted({p for pattern in GPU_DEVICE_GLOBS for p in glob.glob(pattern)})
    return tuple(Mount(kind=MountKind.DEV_BIND, target=p, source=p) for p in nodes)


def driver_library_mounts(hidden: Iterable[str] = ("/usr/local",)) -> tuple[Mount, ...]:
    """The user-space driver libraries (libcuda, NVML, PTX JIT) that lie outside what system_mounts shows
    (e.g. under /usr/local); libraries under /usr are visible already."""
    found: list[str] = []
    for directory in DRIVER_LIB_DIRS:
        for pattern in DRIVER_LIB_GLOBS:
            found.extend(glob.glob(os.path.join(directory, pattern)))
    hidden = tuple(hidden)
    needs = set()
    for p in found:  # bind the hidden DIRECTORIES the libraries and their link chains live in (the driver's
        # folder, e.g. /usr/local/nvidia/lib64): a visible link under /usr then resolves, and no link is
        # recreated over one the /usr bind already shows
        for q in (p, os.path.realpath(p)):
            if any(q.startswith(h + "/") for h in hidden):
                needs.add(os.path.dirname(q))
    return tree_mounts(sorted(needs))


def gpu_mounts() -> tuple[Mount, ...]:
    """Everything CUDA needs besides the toolkit: device nodes, driver libraries, /sys read-only (PCI
    topology) and /proc/driver/nvidia (visible through the sandbox's own /proc)."""
    return (*gpu_device_mounts(), *driver_library_mounts(), ro("/sys", optional=True))


GPU_ENV_PASSTHROUGH = ("CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER", "NVIDIA_VISIBLE_DEVICES")


def gpu_stage_policy(name: str, *, python_paths: Iterable[str | Path] = (), toolkit_root: str | None = None,
                     env: dict[str, str] | None = None, limits: Limits | None = None,
                     run_as: RunAs = RunAs.AUTO, profiling_admin: bool = False,
                     unshare_ipc: bool = True, tool_paths: Iterable[str | Path] = ()) -> SandboxPolicy:
    """A policy for a GPU stage (the candidate's child session, compute-sanitizer, ncu): the OS, the GPU
    (device nodes, driver libraries), this Python with `python_paths` (package folders, also PYTHONPATH),
    and the CUDA toolkit (its tools) when given, and `tool_paths` (install folders of tools outside the
    toolkit, e.g. Nsight Compute's under /opt: see `tool_install_dir`; on PATH first) - all read-only. No
    address-space limit (CUDA reserves large virtual ranges). Inputs go into the scratch directory; a
    stage's judge-side state stays outside."""
    paths = [str(Path(p).resolve()) for p in python_paths if Path(p).exists()]
    extra = [str(Path(p).resolve()) for p in tool_paths if Path(p).is_dir()]
    tools = [toolkit_root] if toolkit_root else []
    mounts = (*system_mounts(), *gpu_mounts(), *python_mounts(paths), *tree_mounts([*tools, *extra]))
    path = ":".join([*extra, *([f"{toolkit_root}/bin"] if toolkit_root else []), "/usr/bin", "/bin"])
    base = {"PATH": path, "HOME": "/scratch",
            "TMPDIR": "/tmp", "LC_ALL": "C.UTF-8", "PYTHONDONTWRITEBYTECODE": "1",
            "PYTHONPATH": ":".join(paths)}
    return SandboxPolicy(
        name=name, mounts=mounts, env={**base, **(env or {})}, env_passthrough=GPU_ENV_PASSTHROUGH,
        limits=limits or Limits(address_space_bytes=None, processes=512, file_size_bytes=8 << 30,
                                open_files=65536),
        run_as=RunAs.CALLER if profiling_admin else run_as, profiling_admin=profiling_admin,
        unshare_ipc=unshare_ipc)


def tool_install_dir(executable: str | Path) -> Path:
    """The folder a tool is installed in, found from its executable (through symlinks such as
    /usr/local/bin/ncu -> /opt/nvidia/nsight-compute/<version>/ncu): mount it whole, since launchers like
    ncu's load their own libraries and sections from beside themselves."""
    return Path(executable).resolve().parent


def _dedupe(mounts: list[Mount]) -> list[Mount]:
    seen: set[tuple[str, str]] = set()
    out = []
    for m in mounts:
        if (m.kind.value, m.target) not in seen:
            seen.add((m.kind.value, m.target))
            out.append(m)
    return out
