"""The sandbox's typed policy (what a sandboxed process may see and use) and its outcome."""

from __future__ import annotations

import posixpath
from enum import Enum

from pydantic import Field, field_validator, model_validator

from ptxcore.schema import FrozenModel, SandboxMode

POLICY_VERSION = 1
"""Bumped whenever what a sandboxed process can see or do changes (part of the compile cache key)."""

GIB = 1 << 30
RESERVED_TARGETS = ("/", "/proc", "/dev")


def _check_abs(path: str) -> str:
    if not path.startswith("/") or "\0" in path or ".." in path.split("/"):
        raise ValueError(f"not an absolute path without '..': {path!r}")
    return posixpath.normpath(path)


class MountKind(str, Enum):
    """One bubblewrap mount operation."""

    RO_BIND = "ro_bind"
    """Host path visible read-only (--ro-bind)."""
    RW_BIND = "rw_bind"
    """Host path visible and writable (--bind): only for state a stage must hand to the next one (a
    Triton candidate's own compile cache), never the judge's."""
    DEV_BIND = "dev_bind"
    """Host device node usable (--dev-bind), e.g. /dev/nvidia0."""
    TMPFS = "tmpfs"
    """An empty private tmpfs over the target: hides what a bind above put there (--tmpfs)."""
    SYMLINK = "symlink"
    """A symbolic link at the target pointing to `source` (--symlink), e.g. /bin -> usr/bin."""


class Mount(FrozenModel):
    """One mount of the sandbox's file system, applied in policy order (later mounts cover earlier ones)."""

    kind: MountKind
    """What kind of mount."""
    target: str
    """Path inside the sandbox (absolute)."""
    source: str | None = None
    """Host path (binds) or link text (symlink); None for a tmpfs. Binds default to `target`."""
    optional: bool = False
    """Skip a bind whose host path does not exist (--ro-bind-try / --dev-bind-try)."""

    @field_validator("target")
    @classmethod
    def _target_ok(cls, v: str) -> str:
        v = _check_abs(v)
        if v in RESERVED_TARGETS:
            raise ValueError(f"{v} is managed by the sandbox itself")
        return v

    @model_validator(mode="after")
    def _source_ok(self) -> Mount:
        if self.kind is MountKind.TMPFS and self.source is not None:
            raise ValueError("a tmpfs has no source")
        if self.kind is MountKind.SYMLINK and not self.source:
            raise ValueError("a symlink needs its link text as source")
        if self.kind in (MountKind.RO_BIND, MountKind.RW_BIND, MountKind.DEV_BIND) and self.source is not None:
            _check_abs(self.source)
        return self

    @property
    def host_path(self) -> str:
        """The host path a bind shows (its source, else its target)."""
        return self.source or self.target


def ro(path: str, target: str | None = None, optional: bool = False) -> Mount:
    """A read-only bind of a host path (at the same path unless `target`)."""
    return Mount(kind=MountKind.RO_BIND, target=target or path, source=path, optional=optional)


def rw(path: str, target: str | None = None) -> Mount:
    """A writable bind of a host path (at the same path unless `target`)."""
    return Mount(kind=MountKind.RW_BIND, target=target or path, source=path)


class Limits(FrozenModel):
    """Per-process resource limits (setrlimit before bwrap execs; inherited by every descendant)."""

    address_space_bytes: int | None = Field(default=8 * GIB, gt=0)
    """RLIMIT_AS per process, bytes; None: unlimited (CUDA reserves huge virtual ranges: None on GPU stages)."""
    processes: int | None = Field(default=256, gt=0)
    """Processes and threads the sandbox may add for its host uid (RLIMIT_NPROC above the uid's current
    count). The kernel does not enforce it for uid 0: see SandboxPolicy.run_as."""
    file_size_bytes: int | None = Field(default=2 * GIB, gt=0)
    """RLIMIT_FSIZE: largest file a process may write, bytes."""
    cpu_time_s: int | None = Field(default=None, gt=0)
    """RLIMIT_CPU per process, seconds of CPU time (SIGXCPU, then SIGKILL); None: only the wall timeout."""
    open_files: int | None = Field(default=4096, gt=0)
    """RLIMIT_NOFILE."""
    resident_bytes: int | None = Field(default=None, gt=0)
    """Resident memory of all the sandbox's processes together, bytes; above it the whole sandbox is killed
    (enforced from outside, see memory.MemoryWatch). None: only address_space_bytes and the host's limits.
    The limit for GPU stages, where an address-space limit cannot be used."""


class RunAs(str, Enum):
    """Which host user runs the sandbox."""

    AUTO = "auto"
    """nobody (65534) when the caller is root (so that RLIMIT_NPROC binds and file modes apply; host paths
    nobody cannot reach are staged for it, see reach.py), else the caller. As root, a policy whose sandbox
    cannot start as nobody does not start (SandboxUnavailableError): candidate code never runs as root."""
    CALLER = "caller"
    """The calling user (as root: no process-count limit; the PID namespace still kills all at the end). Only
    for our own tools (the one ncu replay with profiling_admin, checks on the GPU host), never candidate code."""
    NOBODY = "nobody"
    """Always nobody; an error when that cannot work (needs unprivileged user namespaces)."""


class SandboxPolicy(FrozenModel):
    """What a sandboxed process sees and may use. Always: no network, new session, private /tmp and scratch,
    environment cleared, all capabilities dropped, dies with its parent."""

    name: str = Field(min_length=1, pattern=r"^[\w.-]+$")
    """Short label for logs (compile, gpu-child, memcheck, ...)."""
    mounts: tuple[Mount, ...] = ()
    """File system, in order, on top of an empty root with a new /proc and a minimal /dev."""
    scratch_target: str = "/scratch"
    """Where the private writable scratch directory appears (removed after the sandbox)."""
    env: dict[str, str] = Field(default_factory=dict)
    """The whole environment of the sandboxed process (nothing else is inherited)."""
    env_passthrough: tuple[str, ...] = ()
    """Host variables copied in when set (e.g. CUDA_VISIBLE_DEVICES)."""
    limits: Limits = Field(default_factory=Limits)
    """Resource limits."""
    run_as: RunAs = RunAs.AUTO
    """Host user of the sandbox."""
    unshare_pid: bool = True
    """Own PID namespace: when the command ends or is killed, every descendant dies with it. Turn off only
    where a tool must see host processes; then no-survivor is not guaranteed."""
    unshare_ipc: bool = True
    """Own System V IPC / POSIX message-queue namespace (/dev/shm is private in any case)."""
    output_limit_bytes: int = Field(default=1 << 20, gt=0)
    """Per stream: stdout/stderr beyond this many bytes are counted and dropped."""
    profiling_admin: bool = False
    """Nsight Compute where the driver restricts GPU counters to admins (RmProfilingAdminOnly=1): keep
    CAP_SYS_ADMIN of the host and use no user namespace. WEAKER: such a process could remount what it sees.
    Needs a root caller and run_as=caller; use only for the one ncu replay, never for plain candidate runs."""

    @field_validator("scratch_target")
    @classmethod
    def _scratch_ok(cls, v: str) -> str:
        v = _check_abs(v)
        if v in RESERVED_TARGETS or v == "/tmp":
            raise ValueError(f"scratch cannot be {v}")
        return v

    @field_validator("env")
    @classmethod
    def _env_ok(cls, v: dict[str, str]) -> dict[str, str]:
        for key, value in v.items():
            if not key or "=" in key or "\0" in key or "\0" in value:
                raise ValueError(f"bad environment entry {key!r}")
        return v

    @model_validator(mode="after")
    def _admin_only_as_caller(self) -> SandboxPolicy:
        if self.profiling_admin and self.run_as is not RunAs.CALLER:
            raise ValueError("profiling_admin needs run_as=caller (a root caller)")
        return self

    @model_validator(mode="after")
    def _no_mount_over_scratch(self) -> SandboxPolicy:
        for m in self.mounts:
            if m.target in (self.scratch_target, "/tmp") or m.target.startswith(self.scratch_target + "/"):
                raise ValueError(f"mount at {m.target} would cover the scratch directory or /tmp")
        return self


class SandboxStatus(str, Enum):
    """How a sandboxed command ended."""

    EXITED = "exited"
    """It exited by itself (see exit_code)."""
    SIGNALED = "signaled"
    """A signal ended it (see signal): a resource limit (SIGXCPU 24, SIGXFSZ 25), SIGKILL (9), a crash."""
    TIMED_OUT = "timed_out"
    """The wall timeout passed: the whole sandbox was killed."""
    MEMORY_LIMIT = "memory_limit"
    """Its processes together held more resident memory than limits.resident_bytes: the whole sandbox was
    killed (see resident_bytes)."""


class SandboxOutcome(FrozenModel):
    """The typed result of one sandboxed command."""

    status: SandboxStatus
    """How it ended."""
    exit_code: int | None = None
    """Exit status when EXITED."""
    signal: int | None = None
    """Signal number when SIGNALED (bwrap reports 128 + signal; an exit(137) reads as signal 9)."""
    stdout: str = ""
    """Captured standard output (UTF-8, undecodable bytes replaced), at most output_limit_bytes."""
    stderr: str = ""
    """Captured standard error, as stdout."""
    stdout_dropped_bytes: int = 0
    """Bytes of stdout beyond the cap (dropped)."""
    stderr_dropped_bytes: int = 0
    """Bytes of stderr beyond the cap (dropped)."""
    duration_s: float
    """Wall time from start to the end of the sandbox, seconds."""
    mode: SandboxMode
    """bwrap, or the development opt-out."""
    resident_bytes: int | None = Field(default=None, gt=0)
    """The summed resident memory that tripped the limit, when MEMORY_LIMIT."""

    @model_validator(mode="after")
    def _fields_match_status(self) -> SandboxOutcome:
        if (self.resident_bytes is not None) != (self.status is SandboxStatus.MEMORY_LIMIT):
            raise ValueError("resident_bytes is set exactly when the memory limit killed the sandbox")
        if (self.exit_code is not None) != (self.status is SandboxStatus.EXITED):
            raise ValueError("exit_code is set exactly when the command EXITED")
        if (self.signal is not None) != (self.status is SandboxStatus.SIGNALED):
            raise ValueError("signal is set exactly when the command was SIGNALED")
        return self

    @property
    def ok(self) -> bool:
        """Exited with status 0."""
        return self.status is SandboxStatus.EXITED and self.exit_code == 0

    @property
    def output(self) -> str:
        """stdout then stderr."""
        return self.stdout + self.stderr
