"""Finding bubblewrap and turning a SandboxPolicy into its command line.

bubblewrap (github.com/containers/bubblewrap) is the unprivileged sandbox tool Flatpak uses: mount, PID,
network, IPC, UTS, user and cgroup namespaces, with no daemon and no setuid bit needed. We use it rather
than calling unshare/mount ourselves; resource limits are applied just before it starts (limits.py).
"""

from __future__ import annotations

import functools
import logging
import os
import shutil
import subprocess
from pathlib import Path

from .models import MountKind, RunAs, SandboxPolicy

log = logging.getLogger(__name__)

NOBODY = 65534
HOSTNAME = "sandbox"
BWRAP_ENV = "PTXBENCH_BWRAP"
INSTALL_HINT = ("install bubblewrap (apt-get install -y bubblewrap) or point PTXBENCH_BWRAP at a bwrap binary "
                "(benchmarks/device/fetch_bwrap.sh builds one for hosts without a package manager)")


_WARNED: set[str] = set()


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


def _mount_flags(policy: SandboxPolicy, scratch: Path) -> list[str]:
    out = ["--proc", "/proc", "--dev", "/dev", "--bind", str(scratch / "tmp"), "/tmp"]
    for m in policy.mounts:
        if m.kind is MountKind.TMPFS:
            out += ["--size", str(64 << 20), "--tmpfs", m.target]
        elif m.kind is MountKind.SYMLINK:
            out += ["--symlink", m.source or "", m.target]
        else:
            verb = "--ro-bind" if m.kind is MountKind.RO_BIND else "--dev-bind"
            out += [verb + ("-try" if m.optional else ""), m.host_path, m.target]
    return out


def sandbox_env(policy: SandboxPolicy) -> dict[str, str]:
    """The complete environment of the sandboxed process."""
    env = dict(policy.env)
    for name in policy.env_passthrough:
        if name in os.environ:
            env[name] = os.environ[name]
    return env


def bwrap_argv(policy: SandboxPolicy, scratch: Path, cmd: list[str], status_fd: int, cwd: str | None
               ) -> list[str]:
    """bwrap's command line running `cmd` under `policy`, with `scratch` as the writable directory."""
    caps = ["--cap-drop", "ALL"] + (["--cap-add", "CAP_SYS_ADMIN"] if policy.profiling_admin else [])
    argv = [find_bwrap(), *_namespace_flags(policy), "--die-with-parent", "--new-session", *caps, "--clearenv"]
    for key, value in sandbox_env(policy).items():
        argv += ["--setenv", key, value]
    argv += [*_mount_flags(policy, scratch), "--bind", str(scratch / "files"), policy.scratch_target]
    argv += [arg for m in policy.mounts if m.kind is MountKind.TMPFS for arg in ("--remount-ro", m.target)]
    argv += ["--remount-ro", "/"]  # bwrap's own root tmpfs: nothing is writable outside scratch and /tmp
    argv += ["--chdir", cwd or policy.scratch_target, "--json-status-fd", str(status_fd), "--", *cmd]
    return argv


def caller_is_root() -> bool:
    return os.geteuid() == 0


@functools.lru_cache(maxsize=64)
def _probe(policy_json: str, as_nobody: bool) -> str | None:
    """None when a trivial command runs under this policy; else bwrap's complaint (first line)."""
    from .runner import Sandbox  # runner imports this module

    policy = SandboxPolicy.model_validate_json(policy_json)
    forced = policy.model_copy(update={"run_as": RunAs.NOBODY if as_nobody else RunAs.CALLER})
    try:
        with Sandbox(forced, _probing=True) as box:
            outcome = box.run(["/bin/sh", "-c", "exit 0"], timeout_s=30)
    except SandboxUnavailableError as exc:
        return str(exc)
    except (OSError, subprocess.SubprocessError) as exc:
        return f"{type(exc).__name__}: {exc}"
    return None if outcome.ok else (outcome.stderr.strip().splitlines() or ["exit status"])[0]


def resolve_run_as(policy: SandboxPolicy) -> bool:
    """True when this policy's sandbox runs as nobody (see RunAs)."""
    if policy.run_as is RunAs.CALLER:
        return False
    if policy.profiling_admin and not caller_is_root():
        raise SandboxUnavailableError("profiling_admin needs a root caller")
    if policy.run_as is RunAs.NOBODY:
        if not caller_is_root():
            raise SandboxUnavailableError("run_as=nobody needs a root caller")
        return True
    if not caller_is_root():
        return False
    problem = _probe(policy.model_dump_json(), True)
    if problem is not None:
        if policy.name in _WARNED:
            return False
        _WARNED.add(policy.name)
        log.warning("sandbox %s: cannot run as nobody (%s); running as root: no process-count limit",
                    policy.name, problem)
        return False
    return True


def check_available(policy: SandboxPolicy) -> None:
    """Raise SandboxUnavailableError unless a command can run under `policy` here (cached per policy)."""
    as_nobody = resolve_run_as(policy)
    problem = _probe(policy.model_dump_json(), as_nobody)
    if problem is not None:
        raise SandboxUnavailableError(f"sandbox {policy.name} does not start: {problem}; {INSTALL_HINT}")
