"""Run commands in a sandbox: private scratch, captured output with a cap, a hard wall deadline, no survivors.

    with Sandbox(policy) as box:
        (box.scratch / "kernel.cu").write_text(source)
        outcome = box.run(["nvcc", ..., box.inside("kernel.cu")], timeout_s=300)

On timeout the whole sandbox is killed: the bwrap monitor (its process group), and the PID namespace's
init, whose death makes the kernel kill every process of the namespace (detached sessions included). The
scratch directory is removed when the `with` block ends, whatever happened.

The parts: process.py (one started sandbox process: command line, status, members, kill), memory.py (the
resident-memory limit), probe.py (can the policy's sandbox start here, and as nobody), reach.py (host paths
nobody cannot reach, staged for it).
"""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import time
from pathlib import Path

from ptxcore.schema import SandboxMode

from .bwrap import SandboxUnavailableError
from .limits import effective_uid
from .models import SandboxOutcome, SandboxPolicy, SandboxStatus
from .probe import check_available, resolve_run_as
from .process import Capture, Redirect, SandboxProcess, make_root, pump, reported_exit, split_exit

log = logging.getLogger(__name__)

OPT_OUT_ENV = "PTXBENCH_UNSANDBOXED"

__all__ = ["OPT_OUT_ENV", "Sandbox", "SandboxProcess", "check_available", "run", "sandbox_disabled"]


def sandbox_disabled() -> bool:
    """The explicit development opt-out (PTXBENCH_UNSANDBOXED=1) is set."""
    return os.environ.get(OPT_OUT_ENV, "") == "1"


class Sandbox:
    """One sandbox: a private scratch directory and the commands run inside it (see module docstring)."""

    def __init__(self, policy: SandboxPolicy) -> None:
        self.policy = policy
        self.mode = SandboxMode.UNSANDBOXED if sandbox_disabled() else SandboxMode.BWRAP
        self._nobody = False
        self._root: Path | None = None
        self._live: list[SandboxProcess] = []

    def __enter__(self) -> Sandbox:
        if self.mode is SandboxMode.UNSANDBOXED:
            log.warning("SANDBOX DISABLED (%s=1): %s runs candidate work without isolation; results are "
                        "not trustworthy", OPT_OUT_ENV, self.policy.name)
        else:
            check_available(self.policy)
            self._nobody = resolve_run_as(self.policy)
        self._root = make_root(self.policy.name, self.uid)
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

    def spawn(self, cmd: list[str], *, cwd: str | None = None, stdin: Redirect = subprocess.DEVNULL,
              stdout: Redirect = subprocess.PIPE, stderr: Redirect = subprocess.PIPE,
              pass_fds: tuple[int, ...] = ()) -> SandboxProcess:
        """Start `cmd` (for long-lived children with their own pipes; `pass_fds` are visible inside).
        End it with kill() or by leaving the with block. run() is the simple form."""
        proc = SandboxProcess.start(self.policy, self.scratch.parent, cmd, uid=self.uid, mode=self.mode, cwd=cwd,
                                    stdin=stdin, stdout=stdout, stderr=stderr, pass_fds=pass_fds)
        self._live.append(proc)
        return proc

    def kill(self, proc: SandboxProcess) -> None:
        """Kill a spawned sandbox and everything in it."""
        proc.kill()
        self._live = [p for p in self._live if p is not proc]

    def run(self, cmd: list[str], timeout_s: float, cwd: str | None = None) -> SandboxOutcome:
        """Run `cmd` to its end or to the deadline; a bad command is an outcome, a broken sandbox raises."""
        started = time.monotonic()
        return self.finish(self.spawn(cmd, cwd=cwd), timeout_s, started)

    def finish(self, proc: SandboxProcess, timeout_s: float, started: float | None = None) -> SandboxOutcome:
        """Read a spawned process's output until it ends or `timeout_s` from `started` (default now) passes, then
        kill what is left of its sandbox: run()'s second half, for a process started before its work was known
        (ptxcore.gpu.harness.prestart). Its stdout and stderr must be pipes."""
        started = time.monotonic() if started is None else started
        out, err = Capture(self.policy.output_limit_bytes), Capture(self.policy.output_limit_bytes)
        finished = pump(proc, {proc.popen.stdout: out, proc.popen.stderr: err}, started + timeout_s)
        status = bytes(proc.status)
        self.kill(proc)
        return self._outcome(proc, status, not finished, out, err, time.monotonic() - started)

    def _outcome(self, proc: SandboxProcess, status: bytes, timed_out: bool, out: Capture,
                 err: Capture, duration_s: float) -> SandboxOutcome:
        common = {"stdout": out.text(), "stderr": err.text(), "stdout_dropped_bytes": out.dropped,
                  "stderr_dropped_bytes": err.dropped, "duration_s": round(duration_s, 4), "mode": self.mode}
        if proc.memory_exceeded is not None:
            return SandboxOutcome(status=SandboxStatus.MEMORY_LIMIT, resident_bytes=proc.memory_exceeded, **common)
        if timed_out:
            return SandboxOutcome(status=SandboxStatus.TIMED_OUT, **common)
        if self.mode is SandboxMode.UNSANDBOXED:
            code = proc.popen.returncode
            exited, signalled = (code, None) if code >= 0 else (None, -code)
        else:
            reported = reported_exit(status)
            if reported is None:  # no report: the sandbox itself failed, and its last line says why
                raise SandboxUnavailableError(f"sandbox {self.policy.name} failed to start the command: "
                                              f"{(err.text().strip().splitlines() or ['no message'])[-1]}")
            exited, signalled = split_exit(reported)
        if signalled is not None:
            return SandboxOutcome(status=SandboxStatus.SIGNALED, signal=signalled, **common)
        return SandboxOutcome(status=SandboxStatus.EXITED, exit_code=exited, **common)


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
