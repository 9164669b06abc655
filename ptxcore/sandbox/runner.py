"""Run commands in a sandbox: private scratch, captured output with a cap, a hard wall deadline, no survivors.

    with Sandbox(policy) as box:
        (box.scratch / "kernel.cu").write_text(source)
        outcome = box.run(["nvcc", ..., box.inside("kernel.cu")], timeout_s=300)

On timeout the whole sandbox is killed: the bwrap monitor (its process group), and the PID namespace's
init, whose death makes the kernel kill every process of the namespace (detached sessions included). The
scratch directory is removed when the `with` block ends, whatever happened.
"""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import os
import select
import selectors
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from pathlib import Path

from ptxcore.schema import SandboxMode

from .bwrap import (
    BWRAP_ENV,
    INSTALL_HINT,
    NOBODY,
    SandboxUnavailableError,
    bwrap_argv,
    caller_is_root,
    sandbox_env,
)
from .limits import effective_uid, with_limits
from .models import RunAs, SandboxOutcome, SandboxPolicy, SandboxStatus

log = logging.getLogger(__name__)

OPT_OUT_ENV = "PTXBENCH_UNSANDBOXED"
BASE_DIR_ENV = "PTXBENCH_SANDBOX_DIR"
KILL_WAIT_S = 10.0
GIB = 1 << 30
PAGE_BYTES = os.sysconf("SC_PAGE_SIZE")


def sandbox_disabled() -> bool:
    """The explicit development opt-out (PTXBENCH_UNSANDBOXED=1) is set."""
    return os.environ.get(OPT_OUT_ENV, "") == "1"


def _base_dir() -> Path:
    """Parent of scratch directories: $PTXBENCH_SANDBOX_DIR, else <tmp>/ptxbench-sandbox[-<uid>] (mode
    0711: the sandbox's user reaches its own scratch by name, nobody lists the others)."""
    default = "ptxbench-sandbox" if os.geteuid() == 0 else f"ptxbench-sandbox-{os.geteuid()}"
    base = Path(os.environ.get(BASE_DIR_ENV) or Path(tempfile.gettempdir()) / default)
    base.mkdir(mode=0o711, parents=True, exist_ok=True)
    st = base.lstat()
    if not base.is_dir() or base.is_symlink() or st.st_uid != os.geteuid():
        raise SandboxUnavailableError(f"sandbox directory {base} is not a directory owned by this user")
    return base


class _Capture:
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

    def feed_status(self, chunk: bytes) -> None:
        """Take bytes of bwrap's JSON status; pin the PID namespace's init with a pidfd when it appears."""
        known = len(_child_pids(self.status))
        self.status += chunk
        for pid in _child_pids(self.status)[known:]:
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
        roots = _child_pids(self.status) or [self.popen.pid]
        if self.status:  # bwrap started: its init is inside the new PID namespace (when the policy asks)
            try:
                ns = os.readlink(f"/proc/{roots[0]}/ns/pid")
                if ns != os.readlink("/proc/self/ns/pid"):
                    return [pid for pid in _all_pids() if _pid_ns(pid) == ns]
            except OSError:
                pass
        parents = {pid: _ppid(pid) for pid in _all_pids()}
        seen, todo = [], list(roots)
        while todo:
            pid = todo.pop()
            if pid not in seen:
                seen.append(pid)
                todo.extend(child for child, parent in parents.items() if parent == pid)
        return seen

    def exit_code(self) -> int | None:
        """How the command ended, as Popen.returncode does (negative: killed by that signal); None while it
        runs. bwrap reports a signal death as 128 + signal (so an exit(137) reads as SIGKILL)."""
        code = self.popen.poll()
        if code is None:
            return None
        self.drain_status()
        reported = _exit_code(self.status)
        if reported is None:
            return code
        return -(reported - 128) if 128 < reported <= 128 + 64 else reported

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
        if self.memory_exceeded is None:
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


class MemoryWatch:
    """Kills a sandbox whose processes together hold more resident memory than `limit` bytes.

    bubblewrap sets no cgroup, and whether a cgroup can be made differs by host (the CPU machines have a
    cgroup v1 hierarchy we may not write; the GPU host is root in a VM), while an address-space limit
    breaks CUDA, which reserves huge virtual ranges. So the limit is enforced from outside: a thread sums
    the resident pages (/proc/PID/statm) of every process of the sandbox every `interval_s` (the members
    found again every `rescan_s`) and SIGKILLs the whole sandbox above the limit. It bounds growth, not a
    spike shorter than one interval (the kernel's OOM killer stays the backstop); a page shared by several
    processes counts once for each. Its cost: benchmarks/sandbox_watch_cost.py.
    """

    def __init__(self, proc: SandboxProcess, limit: int, interval_s: float = 0.05, rescan_s: float = 0.5) -> None:
        self.proc, self.limit, self.interval_s, self.rescan_s = proc, limit, interval_s, rescan_s
        self.tripped_at: int | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="sandbox-memory-watch", daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        # Finding the members reads every process of the host (a few ms); their statm is microseconds. So the
        # members are found again every `rescan_s` (a new process is counted from then on) and read every poll.
        members: list[int] = []
        scanned = 0.0
        while not self._stop.wait(self.interval_s) and self.proc.popen.poll() is None:
            if time.monotonic() - scanned >= self.rescan_s:
                members, scanned = self.proc.member_pids(drain=False), time.monotonic()
            total = sum(_resident_bytes(pid) for pid in members)
            if total > self.limit:
                self.tripped_at = total
                log.warning("sandbox memory limit: %.2f GiB resident > %.2f GiB; killing it",
                            total / GIB, self.limit / GIB)
                self.proc.send_kill()
                return

    def stop(self) -> None:
        self._stop.set()
        if threading.current_thread() is not self._thread:
            self._thread.join(timeout=KILL_WAIT_S)


class Sandbox:
    """One sandbox: a private scratch directory and the commands run inside it (see module docstring)."""

    def __init__(self, policy: SandboxPolicy, *, _probing: bool = False) -> None:
        self.policy = policy
        self.mode = SandboxMode.UNSANDBOXED if sandbox_disabled() else SandboxMode.BWRAP
        self._probing = _probing
        self._nobody = False
        self._root: Path | None = None
        self._live: list[SandboxProcess] = []

    def __enter__(self) -> Sandbox:
        if self.mode is SandboxMode.UNSANDBOXED:
            log.warning("SANDBOX DISABLED (%s=1): %s runs candidate work without isolation; results are "
                        "not trustworthy", OPT_OUT_ENV, self.policy.name)
        elif self._probing:
            self._nobody = self.policy.run_as is RunAs.NOBODY
        else:
            check_available(self.policy)
            self._nobody = resolve_run_as(self.policy)
        self._root = Path(tempfile.mkdtemp(prefix=f"{self.policy.name}-", dir=_base_dir()))
        for sub in ("files", "tmp"):
            (self._root / sub).mkdir()
        if self._nobody:
            for path in (self._root, self._root / "files", self._root / "tmp"):
                os.chown(path, NOBODY, NOBODY)
        return self

    def __exit__(self, *exc: object) -> None:
        for proc in self._live:
            proc.kill()
        self._live.clear()
        if self._root is not None:
            shutil.rmtree(self._root, ignore_errors=True)
            self._root = None

    @property
    def scratch(self) -> Path:
        """The scratch directory as the caller sees it (write inputs here, read outputs from here)."""
        if self._root is None:
            raise RuntimeError("the sandbox is not open (use it in a with block)")
        return self._root / "files"

    @property
    def uid(self) -> int:
        """Host uid that owns the sandbox's processes and files."""
        return effective_uid(self._nobody)

    def inside(self, *parts: str) -> str:
        """A path under scratch as the sandboxed command sees it."""
        if self.mode is SandboxMode.UNSANDBOXED:
            return str(self.scratch.joinpath(*parts))
        return "/".join([self.policy.scratch_target, *parts])

    def give(self, path: Path) -> None:
        """Hand a file or directory the caller wrote under scratch to the sandbox's user."""
        if self.uid != os.getuid():
            os.chown(path, self.uid, self.uid)

    def spawn(self, cmd: list[str], *, cwd: str | None = None, stdin=subprocess.DEVNULL,
              stdout=subprocess.PIPE, stderr=subprocess.PIPE, pass_fds: tuple[int, ...] = ()
              ) -> SandboxProcess:
        """Start `cmd` (for long-lived children with their own pipes; `pass_fds` are visible inside).
        End it with kill() or by leaving the with block. run() is the simple form."""
        status_r = status_w = None
        if self.mode is SandboxMode.UNSANDBOXED:
            argv, keep = cmd, tuple(pass_fds)
            env, where = sandbox_env(self.policy), str(self.scratch) if cwd is None else cwd
        else:
            status_r, status_w = os.pipe()
            argv = bwrap_argv(self.policy, self.scratch.parent, cmd, status_w, cwd)
            keep, env, where = (*pass_fds, status_w), {"PATH": "/usr/bin:/bin"}, "/"
        try:
            popen = subprocess.Popen(
                with_limits(argv, self.policy.limits, self.uid), stdin=stdin, stdout=stdout, stderr=stderr,
                pass_fds=keep, env=env, cwd=where, start_new_session=True)
        except BaseException:
            if status_r is not None:
                os.close(status_r)
            raise
        finally:
            if status_w is not None:
                os.close(status_w)
        proc = SandboxProcess(popen, status_r)
        if self.policy.limits.resident_bytes is not None:
            proc.watch = MemoryWatch(proc, self.policy.limits.resident_bytes)
        self._live.append(proc)
        return proc

    def kill(self, proc: SandboxProcess) -> None:
        """Kill a spawned sandbox and everything in it."""
        proc.kill()
        self._live = [p for p in self._live if p is not proc]

    def run(self, cmd: list[str], timeout_s: float, cwd: str | None = None) -> SandboxOutcome:
        """Run `cmd` to its end or to the deadline; a bad command is an outcome, a broken sandbox raises."""
        started = time.monotonic()
        proc = self.spawn(cmd, cwd=cwd)
        out, err = _Capture(self.policy.output_limit_bytes), _Capture(self.policy.output_limit_bytes)
        finished = _pump(proc, {proc.popen.stdout: out, proc.popen.stderr: err}, started + timeout_s)
        status = bytes(proc.status)
        self.kill(proc)
        return self._outcome(proc, status, not finished, out, err, time.monotonic() - started)

    def _outcome(self, proc: SandboxProcess, status: bytes, timed_out: bool, out: _Capture,
                 err: _Capture, duration_s: float) -> SandboxOutcome:
        popen = proc.popen
        common = {"stdout": out.text(), "stderr": err.text(), "stdout_dropped_bytes": out.dropped,
                  "stderr_dropped_bytes": err.dropped, "duration_s": round(duration_s, 4), "mode": self.mode}
        if proc.memory_exceeded is not None:
            return SandboxOutcome(status=SandboxStatus.MEMORY_LIMIT, resident_bytes=proc.memory_exceeded, **common)
        if timed_out:
            return SandboxOutcome(status=SandboxStatus.TIMED_OUT, **common)
        if self.mode is SandboxMode.UNSANDBOXED:
            code = popen.returncode if popen.returncode >= 0 else 128 - popen.returncode
        else:
            code = _exit_code(status)
            if code is None:
                raise SandboxUnavailableError(f"sandbox {self.policy.name} failed to start the command: "
                                              f"{(err.text().strip().splitlines() or ['no message'])[-1]}")
        if 128 < code <= 128 + 64:
            return SandboxOutcome(status=SandboxStatus.SIGNALED, signal=code - 128, **common)
        return SandboxOutcome(status=SandboxStatus.EXITED, exit_code=code, **common)


def _pump(proc: SandboxProcess, streams: dict, deadline: float) -> bool:
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


def _all_pids() -> list[int]:
    return [int(p.name) for p in Path("/proc").iterdir() if p.name.isdigit()]


def _pid_ns(pid: int) -> str | None:
    try:
        return os.readlink(f"/proc/{pid}/ns/pid")
    except OSError:
        return None


def _resident_bytes(pid: int) -> int:
    try:
        return int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * PAGE_BYTES
    except (OSError, ValueError, IndexError):
        return 0


def _ppid(pid: int) -> int | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
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


def _child_pids(status: bytes) -> list[int]:
    return [int(d["child-pid"]) for d in _status_docs(status) if "child-pid" in d]


def _exit_code(status: bytes) -> int | None:
    codes = [int(d["exit-code"]) for d in _status_docs(status) if "exit-code" in d]
    return codes[-1] if codes else None


def run(cmd: list[str], policy: SandboxPolicy, timeout_s: float, files: dict[str, bytes] | None = None
        ) -> SandboxOutcome:
    """One-shot: put `files` (relative name -> content) in a fresh scratch, run `cmd`, remove everything."""
    with Sandbox(policy) as box:
        for name, content in (files or {}).items():
            target = box.scratch / name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(content)
            box.give(target)
        return box.run(cmd, timeout_s)


_WARNED: set[str] = set()


# ---- can this policy's sandbox start here? (probed once per policy, user and bwrap binary) --------------

def _probe(policy_json: str, as_nobody: bool) -> str | None:
    """None when a trivial command runs under this policy; else bwrap's complaint (first line). The answer
    is kept per policy, user and $PTXBENCH_BWRAP: another binary is probed anew."""
    return _probe_with(policy_json, as_nobody, os.environ.get(BWRAP_ENV))


@functools.lru_cache(maxsize=64)
def _probe_with(policy_json: str, as_nobody: bool, bwrap_env: str | None) -> str | None:
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
