"""One started sandbox process: its root directory, its command line, bwrap's status, its members, its end.

    root = make_root(policy.name, uid)                      # <base>/<name>-XXXX/{files,tmp}
    proc = SandboxProcess.start(policy, root, cmd, uid=uid)  # bwrap behind the limits trampoline
    finished = pump(proc, {proc.popen.stdout: out, proc.popen.stderr: err}, deadline)
    proc.kill()                                              # the namespace's init and the monitor, waited for

bwrap reports on a status pipe (JSON documents): the PID of the namespace's init (`child-pid`), pinned here
with a pidfd so that killing it cannot hit a reused PID, and the command's exit code (`exit-code`, 128 + N
for a death by signal N: `split_exit` is the one place that reads it).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import select
import selectors
import signal
import subprocess
import tempfile
import time
from pathlib import Path
from typing import IO, Any

from ptxcore.schema import SandboxMode

from .bwrap import SandboxUnavailableError, bwrap_argv, sandbox_env
from .limits import with_limits
from .memory import GIB, MemoryWatch
from .models import SandboxPolicy
from .reach import Reach

log = logging.getLogger(__name__)

BASE_DIR_ENV = "PTXBENCH_SANDBOX_DIR"
KILL_WAIT_S = 10.0
MAX_SIGNAL = 64

Redirect = int | IO[Any] | None
"""What Popen takes for stdin, stdout or stderr (subprocess.PIPE, DEVNULL, STDOUT, a file)."""


def split_exit(code: int) -> tuple[int | None, int | None]:
    """(exit code, None) or (None, signal) from an exit status in the shell's form, where bwrap reports a
    command killed by signal N as 128 + N (so an exit(137) reads as SIGKILL)."""
    if 128 < code <= 128 + MAX_SIGNAL:
        return None, code - 128
    return code, None


def _base_dir() -> Path:
    """Parent of sandbox roots: $PTXBENCH_SANDBOX_DIR, else <tmp>/ptxbench-sandbox[-<uid>] (mode 0711: the
    sandbox's user reaches its own root by name, nobody lists the others)."""
    default = "ptxbench-sandbox" if os.geteuid() == 0 else f"ptxbench-sandbox-{os.geteuid()}"
    base = Path(os.environ.get(BASE_DIR_ENV) or Path(tempfile.gettempdir()) / default)
    base.mkdir(mode=0o711, parents=True, exist_ok=True)
    st = base.lstat()
    if not base.is_dir() or base.is_symlink() or st.st_uid != os.geteuid():
        raise SandboxUnavailableError(f"sandbox directory {base} is not a directory owned by this user")
    return base


def make_root(name: str, uid: int) -> Path:
    """A fresh sandbox root (files/ is the scratch, tmp/ its /tmp), owned by `uid` when that is not the caller."""
    root = Path(tempfile.mkdtemp(prefix=f"{name}-", dir=_base_dir()))
    for sub in ("files", "tmp"):
        (root / sub).mkdir()
    if uid != os.getuid():
        for path in (root, root / "files", root / "tmp"):
            os.chown(path, uid, uid)
    return root


class Capture:
    """Bytes of one stream up to a cap; the rest is counted."""

    def __init__(self, cap: int) -> None:
        self.cap, self.data, self.dropped = cap, bytearray(), 0

    def add(self, chunk: bytes) -> None:
        room = self.cap - len(self.data)
        self.data += chunk[:max(room, 0)]
        self.dropped += max(len(chunk) - max(room, 0), 0)

    def text(self) -> str:
        return self.data.decode("utf-8", errors="replace")


class SandboxProcess:
    """A started sandbox: the bwrap monitor's Popen and what bwrap reported on its status pipe."""

    def __init__(self, popen: subprocess.Popen, status_fd: int | None) -> None:
        self.popen = popen
        self.status_fd = status_fd
        self.status = bytearray()
        self.pidfds: list[int] = []
        self.watch: MemoryWatch | None = None
        if status_fd is not None:
            os.set_blocking(status_fd, False)

    @classmethod
    def start(cls, policy: SandboxPolicy, root: Path, cmd: list[str], *, uid: int,
              mode: SandboxMode = SandboxMode.BWRAP, cwd: str | None = None, stdin: Redirect = subprocess.DEVNULL,
              stdout: Redirect = subprocess.PIPE, stderr: Redirect = subprocess.PIPE,
              pass_fds: tuple[int, ...] = ()) -> SandboxProcess:
        """Start `cmd` under `policy` in `root` (make_root) as `uid`; `pass_fds` are visible inside."""
        status_r, status_w = os.pipe() if mode is SandboxMode.BWRAP else (None, None)
        try:
            if status_w is None:
                argv, keep, binds = cmd, tuple(pass_fds), []
                env, where = sandbox_env(policy), str(root / "files") if cwd is None else cwd
            else:
                reach = Reach(root, uid, uid) if uid != os.getuid() else None  # root dropping to nobody
                argv = bwrap_argv(policy, root, cmd, status_w, cwd, reach)
                binds = reach.binds if reach is not None else []
                keep, env, where = (*pass_fds, status_w), {"PATH": "/usr/bin:/bin"}, "/"
            popen = subprocess.Popen(
                with_limits(argv, policy.limits, uid, binds), stdin=stdin, stdout=stdout, stderr=stderr,
                pass_fds=keep, env=env, cwd=where, start_new_session=True)
        except BaseException:
            if status_r is not None:
                os.close(status_r)
            raise
        finally:
            if status_w is not None:
                os.close(status_w)
        proc = cls(popen, status_r)
        if policy.limits.resident_bytes is not None:
            proc.watch = MemoryWatch(lambda: proc.member_pids(drain=False), lambda: popen.poll() is None,
                                     proc.send_kill, policy.limits.resident_bytes)
        return proc

    def feed_status(self, chunk: bytes) -> None:
        """Take bytes of bwrap's JSON status; pin the PID namespace's init with a pidfd when it appears."""
        known = len(child_pids(self.status))
        self.status += chunk
        for pid in child_pids(self.status)[known:]:
            try:  # the monitor is alive and has not reaped it yet, so the pid is not reused
                self.pidfds.append(os.pidfd_open(pid))
            except ProcessLookupError:
                pass

    def member_pids(self, drain: bool = True) -> list[int]:
        """Host PIDs of the processes inside, for the judge's own look at them (/proc/PID/maps): every process
        in the sandbox's PID namespace (found by /proc/PID/ns/pid, which needs no CONFIG_PROC_CHILDREN, absent
        on the H200 host's kernel), else the command and its descendants by parent PID. `drain=False` reads
        only the status already taken (for another thread than the one reading the status pipe)."""
        if drain:
            self.drain_status()
        roots = child_pids(self.status) or [self.popen.pid]
        if self.status:  # bwrap started: its init is inside the new PID namespace (when the policy asks)
            try:
                ns = os.readlink(f"/proc/{roots[0]}/ns/pid")
                if ns != os.readlink("/proc/self/ns/pid"):
                    return [pid for pid in all_pids() if _pid_ns(pid) == ns]
            except OSError:
                pass
        return descendants(roots)

    def exit_code(self) -> int | None:
        """How the command ended, as Popen.returncode does (negative: killed by that signal); None while it
        runs."""
        code = self.popen.poll()
        if code is None:
            return None
        self.drain_status()
        reported = reported_exit(self.status)
        if reported is None:
            return code
        exited, signalled = split_exit(reported)
        return -signalled if signalled is not None else exited

    def drain_status(self) -> None:
        """Read what bwrap has reported so far (non-blocking)."""
        while self.status_fd is not None:
            try:
                chunk = os.read(self.status_fd, 65536)
            except BlockingIOError:
                return
            if not chunk:
                os.close(self.status_fd)
                self.status_fd = None
                return
            self.feed_status(chunk)

    @property
    def memory_exceeded(self) -> int | None:
        """The summed resident bytes at which the memory limit killed this sandbox; None when it did not."""
        return self.watch.tripped_at if self.watch is not None else None

    def limit_note(self) -> str | None:
        """One line on a memory-limit kill, None when there was none."""
        if self.memory_exceeded is None or self.watch is None:
            return None
        return (f"killed: its processes held {self.memory_exceeded / GIB:.2f} GiB of resident memory, over "
                f"the sandbox's {self.watch.limit / GIB:.2f} GiB limit")

    def send_kill(self) -> None:
        """SIGKILL the namespace's init and the monitor's process group; no waiting, no closing."""
        for fd in list(self.pidfds):
            with contextlib.suppress(ProcessLookupError, OSError):
                signal.pidfd_send_signal(fd, signal.SIGKILL)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.popen.pid, signal.SIGKILL)

    def kill(self) -> None:
        """SIGKILL the namespace's init (every process inside dies with it) and the monitor; wait for both."""
        if self.watch is not None:
            self.watch.stop()  # before any pidfd is closed: the watch thread signals through them
        if self.popen.poll() is None:
            self.drain_status()
        self.send_kill()
        with contextlib.suppress(ProcessLookupError):
            self.popen.kill()
        try:
            self.popen.wait(timeout=KILL_WAIT_S)
        except subprocess.TimeoutExpired:
            log.error("sandbox monitor %d did not die within %.0f s", self.popen.pid, KILL_WAIT_S)
        for fd in self.pidfds:
            if not select.select([fd], [], [], KILL_WAIT_S)[0]:
                log.error("a sandbox's PID namespace survived SIGKILL for %.0f s", KILL_WAIT_S)
            os.close(fd)
        self.pidfds.clear()
        for stream in (self.popen.stdout, self.popen.stderr, self.popen.stdin):
            if stream is not None:
                stream.close()
        if self.status_fd is not None:
            os.close(self.status_fd)
            self.status_fd = None


def pump(proc: SandboxProcess, streams: dict[IO[bytes], Capture], deadline: float) -> bool:
    """Read outputs and bwrap's status until the command ends; False when the deadline passed first."""
    sel = selectors.DefaultSelector()
    for stream in streams:
        os.set_blocking(stream.fileno(), False)
        sel.register(stream, selectors.EVENT_READ)
    if proc.status_fd is not None:
        sel.register(proc.status_fd, selectors.EVENT_READ)
    try:
        while sel.get_map():
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            for key, _ in sel.select(timeout=min(remaining, 1.0)):
                try:
                    chunk = os.read(key.fd, 65536)
                except BlockingIOError:
                    continue
                if not chunk:
                    sel.unregister(key.fileobj)
                elif key.fileobj is proc.status_fd:
                    proc.feed_status(chunk)
                else:
                    streams[key.fileobj].add(chunk)
        try:
            proc.popen.wait(timeout=max(deadline - time.monotonic(), 0.001))
        except subprocess.TimeoutExpired:
            return False
        return True
    finally:
        sel.close()


def all_pids(proc: Path = Path("/proc")) -> list[int]:
    """Every PID of the host (as /proc shows it)."""
    return [int(p.name) for p in proc.iterdir() if p.name.isdigit()]


def descendants(roots: list[int], proc: Path = Path("/proc")) -> list[int]:
    """`roots` and every process below them, roots first (parents read from /proc/<pid>/stat)."""
    parents = {pid: _ppid(pid, proc) for pid in all_pids(proc)}
    seen, todo = [], list(roots)
    while todo:
        pid = todo.pop()
        if pid not in seen:
            seen.append(pid)
            todo.extend(child for child, parent in parents.items() if parent == pid)
    return seen


def _pid_ns(pid: int) -> str | None:
    try:
        return os.readlink(f"/proc/{pid}/ns/pid")
    except OSError:
        return None


def _ppid(pid: int, proc: Path = Path("/proc")) -> int | None:
    try:
        stat = (proc / str(pid) / "stat").read_text()
        return int(stat.rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return None


def _status_docs(status: bytes) -> list[dict]:
    docs = []
    for line in bytes(status).decode(errors="replace").splitlines():
        try:
            docs.append(json.loads(line))
        except ValueError:
            continue
    return docs


def child_pids(status: bytes) -> list[int]:
    """The PIDs bwrap reported for the namespace's init (`child-pid`)."""
    return [int(d["child-pid"]) for d in _status_docs(status) if "child-pid" in d]


def reported_exit(status: bytes) -> int | None:
    """The command's exit status as bwrap reported it (`exit-code`, shell form); None before it ended."""
    codes = [int(d["exit-code"]) for d in _status_docs(status) if "exit-code" in d]
    return codes[-1] if codes else None
