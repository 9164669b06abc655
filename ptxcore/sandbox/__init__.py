"""The candidate sandbox (issue 14): every process that builds or runs candidate code runs in here.

bubblewrap gives each command an empty root with only the policy's read-only mounts, a private writable
scratch directory and /tmp, a new /proc and a minimal /dev (plus GPU device nodes when asked), no network,
its own PID/IPC/UTS/user/cgroup namespaces, a new session, no capabilities, an environment built from the
policy alone, and resource limits; when the command ends or its deadline passes, everything inside dies.
No seccomp filter is installed (CUDA needs memfd_create). Without a working bwrap, SandboxUnavailableError
is raised; PTXBENCH_UNSANDBOXED=1 is a loud, recorded development opt-out.

    from ptxcore.sandbox import SandboxPolicy, Limits, Sandbox, run, presets
    policy = SandboxPolicy(name="demo", mounts=presets.system_mounts())
    outcome = run(["/bin/sh", "-c", "echo hi"], policy, timeout_s=10)
"""

from . import presets
from .bwrap import SandboxUnavailableError, find_bwrap
from .models import (
    POLICY_VERSION,
    Limits,
    Mount,
    MountKind,
    RunAs,
    SandboxOutcome,
    SandboxPolicy,
    SandboxStatus,
    ro,
    rw,
)
from .runner import OPT_OUT_ENV, Sandbox, SandboxProcess, check_available, run, sandbox_disabled

__all__ = [
    "presets", "SandboxUnavailableError", "check_available", "find_bwrap", "POLICY_VERSION", "Limits",
    "Mount", "MountKind", "RunAs", "SandboxOutcome", "SandboxPolicy", "SandboxStatus", "ro", "rw", "OPT_OUT_ENV",
    "Sandbox", "SandboxProcess", "run", "sandbox_disabled",
]
