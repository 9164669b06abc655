"""Finding bubblewrap and turning a SandboxPolicy into its command line.

bubblewrap (github.com/containers/bubblewrap) is the unprivileged sandbox tool Flatpak uses: mount, PID,
network, IPC, UTS, user and cgroup namespaces, with no daemon and no setuid bit needed. We use it rather
than calling unshare/mount ourselves; resource limits are applied just before it starts (limits.py).
"""

from __future__ import annotations

import logging
import os
import shutil
from pathlib import Path

from .models import MountKind, SandboxPolicy
from .reach import Reach

log = logging.getLogger(__name__)

NOBODY = 65534
HOSTNAME = "sandbox"
BWRAP_ENV = "PTXBENCH_BWRAP"
INSTALL_HINT = ("install bubblewrap (apt-get install -y bubblewrap) or point PTXBENCH_BWRAP at a bwrap binary "
                "(benchmarks/device/fetch_bwrap.sh builds one for hosts without a package manager)")


class SandboxUnavailableError(RuntimeError):
    """No working sandbox on this machine (bwrap missing, or namespaces not allowed): an infrastructure
    failure, never a verdict. Candidates are never built or run unsandboxed instead."""


def find_bwrap() -> str:
    """Path of bwrap: $PTXBENCH_BWRAP, else PATH."""
    env = os.environ.get(BWRAP_ENV)
    if env:
        if Path(env).is_file() and os.access(env, os.X_OK):
            return env
        raise SandboxUnavailableError(f"{BWRAP_ENV}={env} is not an executable file; {INSTALL_HINT}")
    found = shutil.which("bwrap")
    if found is None:
        raise SandboxUnavailableError(f"bwrap not found; {INSTALL_HINT}")
    return found


def _namespace_flags(policy: SandboxPolicy) -> list[str]:
    user = [] if policy.profiling_admin else ["--unshare-user", "--disable-userns"]
    flags = [*user, "--unshare-net", "--unshare-uts", "--hostname", HOSTNAME, "--unshare-cgroup-try"]
    if policy.unshare_pid:
        flags.append("--unshare-pid")
    if policy.unshare_ipc:
        flags.append("--unshare-ipc")
    return flags


def _mount_flags(policy: SandboxPolicy, scratch: Path, reach: Reach | None) -> list[str]:
    source = reach.source if reach is not None else str
    out = ["--proc", "/proc", "--dev", "/dev", "--bind", source(str(scratch / "tmp")), "/tmp"]
    for m in policy.mounts:
        if m.kind is MountKind.TMPFS:
            out += ["--size", str(64 << 20), "--tmpfs", m.target]
        elif m.kind is MountKind.SYMLINK:
            out += ["--symlink", m.source or "", m.target]
        else:
            verb = {MountKind.RO_BIND: "--ro-bind", MountKind.RW_BIND: "--bind"}.get(m.kind, "--dev-bind")
            out += [verb + ("-try" if m.optional else ""), source(m.host_path), m.target]
    return out


def sandbox_env(policy: SandboxPolicy) -> dict[str, str]:
    """The complete environment of the sandboxed process."""
    env = dict(policy.env)
    for name in policy.env_passthrough:
        if name in os.environ:
            env[name] = os.environ[name]
    return env


def bwrap_argv(policy: SandboxPolicy, scratch: Path, cmd: list[str], status_fd: int, cwd: str | None,
               reach: Reach | None = None) -> list[str]:
    """bwrap's command line running `cmd` under `policy`, with `scratch` as the writable directory; `reach`
    (when the sandbox drops to nobody) replaces the host paths nobody cannot reach by their staging points."""
    caps = ["--cap-drop", "ALL"] + (["--cap-add", "CAP_SYS_ADMIN"] if policy.profiling_admin else [])
    exe = reach.executable(find_bwrap()) if reach is not None else find_bwrap()
    argv = [exe, *_namespace_flags(policy), "--die-with-parent", "--new-session", *caps, "--clearenv"]
    for key, value in sandbox_env(policy).items():
        argv += ["--setenv", key, value]
    files = reach.source(str(scratch / "files")) if reach is not None else str(scratch / "files")
    argv += [*_mount_flags(policy, scratch, reach), "--bind", files, policy.scratch_target]
    # an empty tmpfs (e.g. the one hiding /usr/local) is made read-only, but not one with binds under it: on
    # the H200's kernel bwrap 0.8 cannot remount a tmpfs that holds a bind of another file system (the
    # driver's squashfs) -- such a tmpfs stays a private, size-capped, throw-away scratch of the sandbox
    binds_under = {m.target for m in policy.mounts if m.kind is not MountKind.TMPFS}
    argv += [arg for m in policy.mounts if m.kind is MountKind.TMPFS
             and not any(t.startswith(m.target.rstrip("/") + "/") for t in binds_under)
             for arg in ("--remount-ro", m.target)]
    argv += ["--remount-ro", "/"]  # bwrap's own root tmpfs: nothing is writable outside scratch and /tmp
    argv += ["--chdir", cwd or policy.scratch_target, "--json-status-fd", str(status_fd), "--", *cmd]
    return argv


def caller_is_root() -> bool:
    return os.geteuid() == 0
