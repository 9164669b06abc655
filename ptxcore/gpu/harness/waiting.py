"""The next candidate's session child, started before its candidate is known (issue 27).

A TVM-FFI candidate's session child spends a few tenths of a second before the candidate matters: its stage
sandbox, the interpreter, the CUDA context and CUPTI. `WaitingSession` starts one such child ahead, in its own
stage sandbox with no candidate in it, and has it answer its start-up request; when the next candidate's session
begins, the judge copies the built library into that sandbox (`ChildProcess.hand_in`) and the session goes on
from LOAD as with a child started for it (same command line, same sandbox policy: the policy does not depend on
a built library, which every stage copies into its scratch directory).

Nothing of a candidate runs in a child before LOAD, and each child serves one candidate and is then closed with
its sandbox: no candidate's code runs where another's ran or in a process it could have prepared. At most one
child waits, started when a judgement begins or ends, and it is taken when the session begins: none waits while
a candidate is timed (an idle context would not be charged to it, but none is there). The judge closes it before
it times a baseline (a reference latency not yet cached) and when a Triton candidate's judgement begins, so none
waits beside those timings either. A child that died while waiting, did not start, or waited past MAX_AGE_S is
closed and the session starts a fresh one.
"""

from __future__ import annotations

import atexit
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from ptxcore.gpu.harness.isolation import ChildDied, ChildForged, ChildProcess, ChildTimeout
from ptxcore.gpu.messages import SessionMode
from ptxcore.sandbox import SandboxUnavailableError

log = logging.getLogger(__name__)

MAX_AGE_S = 1200.0
"""A child that has waited this long is replaced by a fresh one."""


@dataclass
class _Started:
    child: ChildProcess
    at: float


class WaitingSession:
    """At most one session child (mode ffi, no candidate) waiting for the judge's next candidate on `device`.
    `start`: how a child is started (default ChildProcess.start; tests give fakes). Thread-safe."""

    def __init__(self, device: int, *, enabled: bool = True,
                 start: Callable[[int], ChildProcess] | None = None) -> None:
        self.device, self.enabled = device, enabled
        self._start = start or (lambda dev: ChildProcess.start(dev, SessionMode.FFI, None))
        self._waiting: _Started | None = None
        self._lock = threading.Lock()
        atexit.register(self.close)

    def fill(self) -> None:
        """Start a child when none waits (one too old or dead is closed first). Does not wait for its start-up;
        a host where the sandbox does not start starts nothing (the session's own start then says why)."""
        if not self.enabled:
            return
        with self._lock:
            stale = self._waiting is not None and not self._usable(self._waiting)
            if stale:
                self._discard(self._waiting, "waited too long or ended")
                self._waiting = None
            if self._waiting is None:
                try:
                    self._waiting = _Started(self._start(self.device), time.monotonic())
                except (SandboxUnavailableError, OSError) as exc:
                    log.warning("no waiting session child: %s", exc)

    def take(self, startup_timeout_s: float) -> ChildProcess | None:
        """The waiting child, started up (its answer awaited up to `startup_timeout_s`) and now the caller's;
        None when none waits or it could not start (the caller starts a fresh one)."""
        with self._lock:
            started, self._waiting = self._waiting, None
        if started is None:
            return None
        if not self._usable(started):
            self._discard(started, "waited too long or ended")
            return None
        try:
            started.child.greet(startup_timeout_s)
        except (ChildDied, ChildTimeout, ChildForged) as exc:
            log.warning("waiting session child not used: its start-up failed: %s", exc)
            self._discard(started, "")
            return None
        return started.child

    def pids(self) -> set[int]:
        """Host PIDs of the waiting child's processes (its sandbox's monitor and PID namespace)."""
        with self._lock:
            started = self._waiting
        if started is None or started.child.returncode() is not None:
            return set()
        boxed = started.child.boxed
        members = set(boxed.member_pids(drain=False)) if boxed is not None else set()
        return {started.child.proc.pid, *members}

    def waiting(self) -> bool:
        with self._lock:
            return self._waiting is not None and self._usable(self._waiting)

    def close(self) -> None:
        """Close the waiting child (the judge's end; also at interpreter exit)."""
        with self._lock:
            started, self._waiting = self._waiting, None
        if started is not None:
            self._discard(started, "")

    @staticmethod
    def _usable(started: _Started) -> bool:
        return started.child.returncode() is None and time.monotonic() - started.at < MAX_AGE_S

    @staticmethod
    def _discard(started: _Started, why: str) -> None:
        if why:
            log.info("waiting session child closed: %s", why)
        try:
            started.child.close(graceful=False)  # nothing of a candidate in it: no need to ask
        except OSError as exc:
            log.warning("closing a waiting session child: %s", exc)
