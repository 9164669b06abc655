"""Tool runs started before their candidate is known (issue 27): memcheck's and ncu's start off the critical path.

A memcheck or ncu run spends seconds before the candidate matters: the tool's launcher, the interpreter, the
child's imports (torch, TVM-FFI, the workload generator). A `WaitingRun` does all that ahead, in its own stage
sandbox (harness.confine), with the child started as `sanitize|profile --request FILE`: it imports, then waits
for the request file, touching nothing on the GPU (no CUDA context: a waiting run holds nothing there while
another candidate is timed). When the candidate arrives the judge copies its library into the sandbox's scratch
directory and writes the request (the library as the child sees it, problem, workload, seed, device, calls);
from then on the run is the one the judge would have started fresh, same command line, same sandbox, same
deadline (counted from the request).

A run taken for a candidate can be prepared first (`WaitingRun.prepare`): the judge writes the run's arguments
without the library, and the child makes its CUDA context and generates its inputs then, while the candidate
builds (pipeline.tools `prepare_ahead`; on the H200 memcheck's run went 0.90 -> 0.49 s and ncu's 2.07 -> 1.71 s). Nothing of the candidate is in the sandbox yet; the request must carry the same
arguments. A prepared run holds a context on the GPU, so it is used or closed before anything is timed there.

Each waiting run serves one candidate and is then killed with its sandbox, so no candidate's code ever runs
where another's ran or in a process it could have prepared. A run that died while waiting, or waited past
MAX_AGE_S, is not used: the judge starts a fresh one (`PrestartedTools.take` returns None, `WaitingRun.go`
raises PrestartLost). Triton candidates are not prestarted (their sandbox mounts the candidate's files).
"""

from __future__ import annotations

import atexit
import json
import logging
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from ptxcore.gpu.child.standalone import PREPARE_NAME
from ptxcore.gpu.harness.confine import StageSandbox, real_tool
from ptxcore.gpu.harness.toolrun import PrestartLost
from ptxcore.sandbox import SandboxOutcome, SandboxUnavailableError
from ptxcore.sandbox.process import SandboxProcess
from ptxcore.sass.tools import ToolNotFoundError

log = logging.getLogger(__name__)

REQUEST_NAME = "request.json"
MAX_AGE_S = 1200.0
"""A run that has waited this long is replaced (the child itself gives up after an hour: REQUEST_WAIT_S)."""
STAGES = ("memcheck", "ncu")


def child_command(stage: str, request: str) -> list[str]:
    """The tool and the child that waits for `request` (a path as the sandbox sees it), for stage memcheck or
    ncu: the judge's own flags (sanitizer.memcheck_tool, ncu.ncu_tool)."""
    from ptxcore.gpu.harness.ncu import ncu_tool
    from ptxcore.gpu.harness.sanitizer import memcheck_tool

    tool, mode = (memcheck_tool(), "sanitize") if stage == "memcheck" else (ncu_tool(), "profile")
    return [*tool, sys.executable, "-m", "ptxcore.gpu.child", mode, "--request", request]


def stage_env(stage: str) -> dict[str, str] | None:
    from ptxcore.gpu.harness.sanitizer import MEMCHECK_ENV

    return dict(MEMCHECK_ENV) if stage == "memcheck" else None


class WaitingRun:
    """One tool run in its own stage sandbox, waiting for its candidate (module docstring). `command(request)`:
    its command line, given the request file's path inside the sandbox (default child_command); `env`: the
    stage's environment (default stage_env)."""

    def __init__(self, stage: str, command: Callable[[str], list[str]] | None = None,
                 env: dict[str, str] | None = None) -> None:
        self.stage = stage
        self.sandbox = StageSandbox(stage, None, env=stage_env(stage) if env is None else env)
        self.sandbox.__enter__()
        self._closed = False
        try:
            request = self.sandbox.box.inside(REQUEST_NAME)
            argv = (command or (lambda r: child_command(stage, r)))(request)
            self.proc: SandboxProcess = self.sandbox.spawn(real_tool(argv))
        except BaseException:
            self.close()
            raise
        self.started = time.monotonic()
        self.prepared: dict | None = None

    @property
    def age_s(self) -> float:
        return time.monotonic() - self.started

    def alive(self) -> bool:
        return not self._closed and self.proc.popen.poll() is None

    def ready(self) -> bool:
        """Still waiting, and not for too long."""
        return self.alive() and self.age_s < MAX_AGE_S

    def prepare(self, request: dict) -> None:
        """Have the run make its CUDA context and its inputs now, from `request` (the arguments `go` will be given,
        without a library): the judge's code only, nothing of a candidate is in the sandbox. The caller owns the
        run from here: it now holds a context on the GPU, so it is used (`go`) or closed before anything is
        timed there."""
        if self.prepared is not None:
            raise ValueError(f"the {self.stage} run is already prepared")
        self.sandbox.write(PREPARE_NAME, json.dumps(request))
        self.prepared = dict(request)

    def go(self, library: Path, request: dict, timeout_s: float) -> SandboxOutcome:
        """Hand `library` in, write the request (its `library` field filled with the path inside), and run to the
        end or `timeout_s` from now. PrestartLost when the run was no longer waiting. Used once: the sandbox is
        gone afterwards. A prepared run takes only the request it was prepared for."""
        try:
            if self.prepared is not None and request != self.prepared:
                raise ValueError(f"the {self.stage} run was prepared for another request")
            if not self.alive():
                raise PrestartLost(f"the prestarted {self.stage} run ended while waiting "
                                   f"(exit {self.proc.popen.poll()})")
            inside = self.sandbox.hand_in(library)
            self.sandbox.write(REQUEST_NAME, json.dumps({**request, "library": str(inside)}))
            return self.sandbox.finish(self.proc, timeout_s)
        finally:
            self.close()

    def close(self) -> None:
        """Kill the run and remove its sandbox (idempotent)."""
        if not self._closed:
            self._closed = True
            self.sandbox.__exit__(None, None, None)


class PrestartedTools:
    """Up to `depth` waiting runs per tool stage (memcheck, ncu) for the next candidates of one judge (one GPU),
    handed out oldest first. Depth 1 has a run ready for a candidate that comes a few seconds after the last one
    ended (its imports took 4.5 s on the H200 host); back-to-back prebuilt candidates find it still importing, which
    a depth of 2 covers (its run started a whole judgement earlier). Thread-safe: the judge's two tool threads take
    their runs at once."""

    def __init__(self, enabled: bool = True, factory: Callable[[str], WaitingRun] = WaitingRun,
                 depth: int = 1) -> None:
        if depth < 1:
            raise ValueError(f"prestart depth must be at least 1, not {depth}")
        self.enabled, self.depth = enabled, depth
        self._factory = factory
        self._runs: dict[str, list[WaitingRun]] = {}
        self._lock = threading.Lock()
        atexit.register(self.close)

    def fill(self, stages: Sequence[str] = STAGES) -> None:
        """Start waiting runs until each of `stages` has `depth` ready (one that ended or waited too long is
        closed first). Cheap (the imports go on in the children); a host where the sandbox or a tool is missing
        starts nothing (the fresh run then says why)."""
        if not self.enabled:
            return
        with self._lock:
            for stage in stages:
                runs = self._runs.setdefault(stage, [])
                for run in [r for r in runs if not r.ready()]:
                    run.close()
                    runs.remove(run)
                while len(runs) < self.depth:
                    try:
                        runs.append(self._factory(stage))
                    except (SandboxUnavailableError, ToolNotFoundError, OSError) as exc:
                        log.warning("no prestarted %s run: %s", stage, exc)
                        break

    def take(self, stage: str) -> WaitingRun | None:
        """The stage's oldest ready run, now the caller's (to `go` once, or close); None when none is ready."""
        while True:
            with self._lock:
                runs = self._runs.get(stage, [])
                run = runs.pop(0) if runs else None
            if run is None or run.ready():
                return run
            log.warning("prestarted %s run not used: %s", stage,
                        "waited too long" if run.alive() else f"ended while waiting (exit {run.proc.popen.poll()})")
            run.close()

    def waiting(self) -> list[str]:
        """The stage of every run waiting now, oldest first per stage."""
        with self._lock:
            return [s for s, runs in self._runs.items() for r in runs if r.ready()]

    def pids(self) -> set[int]:
        """Host PIDs of every process of the waiting runs (each sandbox's monitor and its PID namespace): the
        judge's own, which a check for processes a candidate left behind leaves out by PID."""
        with self._lock:
            runs = [r for rs in self._runs.values() for r in rs]
        out: set[int] = set()
        for run in runs:
            if run.alive():
                out |= {run.proc.popen.pid, *run.proc.member_pids(drain=False)}
        return out

    def close(self) -> None:
        """Kill every waiting run (the judge's end; also at interpreter exit)."""
        with self._lock:
            runs, self._runs = [r for rs in self._runs.values() for r in rs], {}
        for run in runs:
            run.close()
