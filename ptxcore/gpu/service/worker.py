"""The service's handle on one GPU's persistent worker: the `GpuWorker` interface and its process
implementation. A worker that hangs is killed (its whole process group); one that dies is reported with
its exit signal and the last phase it announced, so the lane can tell whose fault it was."""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from enum import StrEnum
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Protocol

from ptxcore.gpu.service.models import GpuHealth, WorkItem
from ptxcore.gpu.service.runner import Phase
from ptxcore.schema import JudgeResult

log = logging.getLogger(__name__)


class WorkerError(RuntimeError):
    """The worker could not start, or stopped answering (hung or dead); it has been killed."""


class OutcomeKind(StrEnum):
    """How an attempt ended, seen from the service."""

    RESULT = "result"
    """The runner returned a JudgeResult."""
    ENGINE_ERROR = "engine_error"
    """The runner raised (infrastructure)."""
    HUNG = "hung"
    """No answer by the deadline; the worker was killed."""
    DIED = "died"
    """The worker process exited."""


@dataclass(frozen=True)
class RunOutcome:
    """One attempt, as the worker handle saw it."""

    kind: OutcomeKind
    phase: Phase
    """Last phase the worker announced before the end."""
    result: JudgeResult | None = None
    detail: str = ""
    """Runner error text, or exit status and the tail of the worker log."""
    exit_signal: int | None = None
    """Signal that ended the process (DIED/HUNG)."""
    duration_s: float = 0.0


class GpuWorker(Protocol):
    """One persistent worker per GPU."""

    gpu: int

    @property
    def pid(self) -> int | None: ...

    def start(self) -> None:
        """Start and wait until ready; raises WorkerError."""

    def run(self, item: WorkItem, deadline_s: float) -> RunOutcome:
        """Judge one item; never raises for a hang or death (those are outcomes)."""

    def health(self, timeout_s: float) -> GpuHealth:
        """Health reading; raises WorkerError when the worker does not answer (it is then killed)."""

    def stop(self) -> None:
        """Shut down (gracefully, then by force)."""

    def abort(self) -> None:
        """Kill the process now, from any thread; a `run` in progress returns DIED."""


def visible_device(gpu: int) -> str:
    """The CUDA_VISIBLE_DEVICES value for service GPU index `gpu` (indices into the service's own
    visible set when the service itself runs with CUDA_VISIBLE_DEVICES)."""
    parent = os.environ.get("CUDA_VISIBLE_DEVICES")
    if parent:
        devices = [d.strip() for d in parent.split(",") if d.strip()]
        if gpu >= len(devices):
            raise WorkerError(f"GPU {gpu} is not among CUDA_VISIBLE_DEVICES={parent}")
        return devices[gpu]
    return str(gpu)


class ProcessGpuWorker:
    """A `python -m ptxcore.gpu.service.worker_main` child in its own session, pinned to one GPU."""

    def __init__(self, gpu: int, runner: str, runner_args: dict, work_dir: Path, start_timeout_s: float = 180.0):
        self.gpu = gpu
        self._engine, self._engine_args = runner, runner_args
        self._dir = work_dir
        self._start_timeout_s = start_timeout_s
        self._proc: subprocess.Popen | None = None
        self._cmd: Connection | None = None
        self._reply: Connection | None = None

    @property
    def pid(self) -> int | None:
        return None if self._proc is None else self._proc.pid

    @property
    def log_path(self) -> Path:
        return self._dir / "worker.log"

    def start(self) -> None:
        cmd_r, cmd_w = os.pipe()
        rep_r, rep_w = os.pipe()
        env = dict(os.environ)
        env["CUDA_VISIBLE_DEVICES"] = visible_device(self.gpu)
        env["PTXBENCH_PHYSICAL_GPU"] = visible_device(self.gpu)
        root = str(Path(__file__).resolve().parents[3])  # the directory holding the ptxcore package
        env["PYTHONPATH"] = os.pathsep.join([root] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
        argv = [sys.executable, "-m", "ptxcore.gpu.service.worker_main", "--gpu", str(self.gpu),
                "--runner", self._engine, "--runner-args", json.dumps(self._engine_args),
                "--work-dir", str(self._dir), "--cmd-fd", str(cmd_r), "--reply-fd", str(rep_w)]
        with open(self.log_path, "ab") as logf:
            self._proc = subprocess.Popen(argv, pass_fds=(cmd_r, rep_w), stdin=subprocess.DEVNULL, stdout=logf,
                                          stderr=subprocess.STDOUT, cwd=self._dir, env=env, start_new_session=True)
        os.close(cmd_r)
        os.close(rep_w)
        self._cmd = Connection(cmd_w, readable=False, writable=True)
        self._reply = Connection(rep_r, readable=True, writable=False)
        message = self._receive(self._start_timeout_s)
        if message is None or message.get("type") != "ready":
            detail = self._describe_end()
            self._kill()
            raise WorkerError(f"GPU {self.gpu}: worker did not start: {detail}")
        log.info("GPU %d: worker %d ready", self.gpu, self._proc.pid)

    def run(self, item: WorkItem, deadline_s: float) -> RunOutcome:
        started = time.monotonic()
        phase = Phase.HARNESS
        if not self._send({"op": "run", "item": item.model_dump(mode="json")}):
            return self._ended(OutcomeKind.DIED, phase, started)
        while True:
            left = deadline_s - (time.monotonic() - started)
            message = self._receive(max(left, 0.0))
            if message is None:
                kind = OutcomeKind.DIED if self._proc.poll() is not None else OutcomeKind.HUNG
                return self._ended(kind, phase, started)
            kind = message.get("type")
            if kind == "phase":
                phase = Phase(message["phase"])
            elif kind == "result":
                return RunOutcome(OutcomeKind.RESULT, phase, JudgeResult.model_validate(message["result"]),
                                  duration_s=time.monotonic() - started)
            elif kind == "engine_error":
                return RunOutcome(OutcomeKind.ENGINE_ERROR, phase, detail=message.get("error", ""),
                                  duration_s=time.monotonic() - started)

    def health(self, timeout_s: float) -> GpuHealth:
        if not self._send({"op": "health"}):
            raise WorkerError(f"GPU {self.gpu}: worker is gone: {self._describe_end()}")
        message = self._receive(timeout_s)
        if message is None or message.get("type") != "health":
            detail = self._describe_end() if self._proc.poll() is not None else f"no answer in {timeout_s:g} s"
            self._kill()
            raise WorkerError(f"GPU {self.gpu}: health check failed: {detail}")
        return GpuHealth.model_validate(message["health"])

    def stop(self) -> None:
        if self._proc is None:
            return
        if self._proc.poll() is None:
            self._send({"op": "shutdown"})
            try:
                self._proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass
        self._kill()

    def abort(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            try:
                os.killpg(self._proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass

    # -- internals --------------------------------------------------------------------------------------

    def _send(self, message: dict) -> bool:
        try:
            self._cmd.send_bytes(json.dumps(message).encode())
            return True
        except (OSError, ValueError):
            return False

    def _receive(self, timeout_s: float) -> dict | None:
        """Next message; None on timeout or when the worker closed its end (died)."""
        try:
            if not self._reply.poll(timeout_s):
                return None
            return json.loads(self._reply.recv_bytes())
        except (EOFError, OSError, ValueError):
            try:
                self._proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass
            return None

    def _ended(self, kind: OutcomeKind, phase: Phase, started: float) -> RunOutcome:
        if kind is OutcomeKind.HUNG:
            self._kill()
            detail = "no answer by the deadline; worker killed"
            sig = None
        else:
            detail = self._describe_end()
            code = self._proc.poll()
            sig = -code if code is not None and code < 0 else None
            self._kill()
        return RunOutcome(kind, phase, detail=detail, exit_signal=sig, duration_s=time.monotonic() - started)

    def _describe_end(self) -> str:
        code = self._proc.poll() if self._proc else None
        if code is None:
            status = "still running"
        elif code < 0:
            status = f"killed by {signal.Signals(-code).name}"
        else:
            status = f"exit status {code}"
        return f"{status}; log tail: {self._log_tail()}"

    def _log_tail(self, limit: int = 600) -> str:
        try:
            data = self.log_path.read_bytes()[-limit:]
        except OSError:
            return ""
        return data.decode(errors="replace").strip().replace("\n", " | ")

    def _kill(self) -> None:
        for conn in (self._cmd, self._reply):
            try:
                conn.close()
            except (OSError, AttributeError):
                pass
        if self._proc is None:
            return
        try:  # the worker's own session: its children (candidate processes, tools) too
            os.killpg(self._proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            if self._proc.poll() is None:
                self._proc.kill()
        try:
            self._proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            log.error("GPU %d: worker %d did not exit after SIGKILL", self.gpu, self._proc.pid)
