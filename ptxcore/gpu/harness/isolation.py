"""Parent side of the isolated child: spawn, talk with deadlines, classify how it ended, kill cleanly.

A candidate's child (modes ffi and triton) runs in the OS sandbox (ptxcore.gpu.harness.confine): no
network, none of the judge's files, its own PID namespace (nothing it starts survives the session), a private
scratch directory as home and working directory, an environment built from the policy alone. The trusted
baseline's child runs in its own session with a scrubbed environment (no API keys or other secrets) and a
private working directory. Either way its stdout/stderr go to a log file that the judge trims for feedback,
never to the judge's pipe. A missed deadline kills the whole child (TIMEOUT); a child that dies mid-call
(exit(), segfault, sticky CUDA error) is reported with its exit status (RUNTIME_ERROR).
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from ptxcore.gpu.errors import InfraError
from ptxcore.gpu.messages import (
    Channel,
    ChannelClosed,
    ChannelTimeout,
    ChildOp,
    ChildReply,
    ChildRequest,
    ProtocolViolation,
    SessionMode,
    new_nonce,
)
from ptxcore.sandbox import SandboxUnavailableError

if TYPE_CHECKING:
    from ptxcore.gpu.harness.confine import StageSandbox
    from ptxcore.gpu.harness.triton import TritonFiles
    from ptxcore.sandbox.process import SandboxProcess

log = logging.getLogger(__name__)
T = TypeVar("T")

ENV_KEEP = (
    "PATH", "LD_LIBRARY_PATH", "CUDA_HOME", "CUDA_PATH", "CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER",
    "NVIDIA_VISIBLE_DEVICES", "NVIDIA_DRIVER_CAPABILITIES", "LANG", "LC_ALL", "TMPDIR",
    "PTXBENCH_PROBLEMS_DIR", "NCCL_NVLS_ENABLE", "TORCH_SYMM_MEM_DISABLE_MULTICAST", "NVSHMEM_DISABLE_NVLS",
)
LOG_TAIL_CHARS = 4000
CHILD_PROGRAM = (sys.executable, "-m", "ptxcore.gpu.child", "session")


def child_env(extra: dict[str, str] | None = None, workdir: Path | None = None) -> dict[str, str]:
    """Only what a CUDA program needs; Python finds ptxcore and the judge's packages through PYTHONPATH."""
    env = {k: os.environ[k] for k in ENV_KEEP if k in os.environ}
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    env["PYTHONUNBUFFERED"] = "1"
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    if workdir is not None:
        env["HOME"] = str(workdir)
    env.update(extra or {})
    return env


def baseline_env() -> dict[str, str]:
    """What the trusted baseline session adds: FlashInfer's JIT cache in a folder that outlives the session
    ($FLASHINFER_WORKSPACE_BASE, else <judge cache root>/flashinfer), so that its kernels are built once per
    host and not in every session's throw-away home (a first build of batch prefill took 96 s on the H200)."""
    from ptxcore.gpu.config import default_cache_root

    base = os.environ.get("FLASHINFER_WORKSPACE_BASE") or str(default_cache_root() / "flashinfer")
    return {"FLASHINFER_WORKSPACE_BASE": base}


def describe_exit(returncode: int | None) -> str:
    if returncode is None:
        return "still running"
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = f"signal {-returncode}"
        return f"killed by {name}"
    return f"exited with code {returncode}"


def tail(text: str, limit: int = LOG_TAIL_CHARS) -> str:
    text = text.strip()
    return text if len(text) <= limit else "... " + text[-limit:]


class ChildDied(RuntimeError):
    """The child ended while the judge waited for a reply."""

    def __init__(self, exit_text: str, log_tail: str) -> None:
        super().__init__(exit_text)
        self.exit_text, self.log_tail = exit_text, log_tail


class ChildTimeout(RuntimeError):
    """The child missed a deadline and was killed."""

    def __init__(self, what: str, timeout_s: float, log_tail: str) -> None:
        super().__init__(f"{what} did not finish within {timeout_s:.1f} s")
        self.log_tail = log_tail


class ChildForged(RuntimeError):
    """Something in the child wrote a message the child's harness did not (the candidate, to the judge's pipe)."""

    def __init__(self, detail: str, log_tail: str) -> None:
        super().__init__(detail)
        self.log_tail = log_tail


@dataclass
class ChildProcess:
    """A running `python -m ptxcore.gpu.child session` and its channel."""

    proc: subprocess.Popen
    channel: Channel
    workdir: tempfile.TemporaryDirectory
    log_path: Path
    nonce: str = ""
    seq: int = 0
    stage: StageSandbox | None = None
    """The sandbox of a candidate's child (None: the trusted baseline's)."""
    boxed: SandboxProcess | None = None

    @classmethod
    def spawn(cls, device: int, mode: SessionMode, startup_timeout_s: float,
              candidate: Path | TritonFiles | None = None) -> ChildProcess:
        """Start a child session; a candidate mode's child (ffi: `candidate` is the built library; triton: its
        TritonFiles) starts inside the sandbox, and `load_args` then names the candidate as it sees it."""
        child = cls.start(device, mode, candidate)
        child.greet(startup_timeout_s)
        return child

    @classmethod
    def start(cls, device: int, mode: SessionMode, candidate: Path | TritonFiles | None = None, *,
              program: tuple[str, ...] = CHILD_PROGRAM) -> ChildProcess:
        """The child's process with its start-up request sent: `greet` waits for its answer (the child sets up
        CUDA and CUPTI meanwhile). A child started without its candidate (mode ffi, `candidate` None) gets it by
        `hand_in` before LOAD (ptxcore.gpu.harness.waiting). `program`: the command before the session's
        arguments (tests give stand-ins that speak the protocol)."""
        from ptxcore.gpu.harness.confine import StageSandbox

        cmd_r, cmd_w = os.pipe()
        rep_r, rep_w = os.pipe()
        work = tempfile.TemporaryDirectory(prefix="ptxbench-child-")
        log_path = Path(work.name) / "child.log"
        argv = [*program, "--cmd-fd", str(cmd_r), "--reply-fd",
                str(rep_w), "--device", str(device), "--session-mode", mode.value]
        stage = boxed = None
        try:
            with open(log_path, "wb") as log_fh:
                if mode.is_candidate:
                    stage = StageSandbox("child", candidate).__enter__()
                    boxed = stage.spawn(argv, stdout=log_fh, stderr=subprocess.STDOUT, pass_fds=(cmd_r, rep_w))
                    proc = boxed.popen
                else:
                    proc = subprocess.Popen(
                        argv, pass_fds=(cmd_r, rep_w), stdin=subprocess.DEVNULL, stdout=log_fh,
                        stderr=subprocess.STDOUT, cwd=work.name,
                        env=child_env(baseline_env(), workdir=Path(work.name)),
                        start_new_session=True,
                    )
        except BaseException as exc:
            for fd in (cmd_r, cmd_w, rep_r, rep_w):
                os.close(fd)
            if stage is not None:
                stage.__exit__(None, None, None)
            work.cleanup()
            if isinstance(exc, SandboxUnavailableError):
                raise InfraError(f"the candidate's sandbox does not start: {exc}") from exc
            raise
        os.close(cmd_r)
        os.close(rep_w)
        child = cls(proc, Channel(rep_r, cmd_w), work, log_path, nonce=new_nonce(), stage=stage, boxed=boxed)
        try:
            child._send(ChildOp.HELLO, {"nonce": child.nonce})
        except BrokenPipeError:
            pass  # it died at once: greet reports how
        return child

    def greet(self, timeout_s: float) -> None:
        """Wait for the answer to the start-up request (ChildDied when the child could not start)."""
        hello = self._receive("child start-up", timeout_s)
        if not hello.ok:
            self.kill()
            raise ChildDied(f"child failed to start: {hello.error}", self.log_tail())

    def hand_in(self, library: Path) -> None:
        """Give a sandboxed child started without its candidate the built library (a read-only copy in its
        scratch directory, which `load_args` then names), before LOAD: nothing of the candidate ran there."""
        if self.stage is None or self.stage.host_candidate is not None:
            raise InfraError("hand_in: only a sandboxed child started without its candidate takes one")
        self.stage.candidate = self.stage.hand_in(library)
        self.stage.host_candidate = library  # one candidate per child

    def load_args(self, load: dict) -> dict:
        """The LOAD request's arguments as the child sees the candidate (the library's copy in its sandbox)."""
        if self.stage is not None and "library" in load:
            return {**load, "library": str(self.stage.candidate)}
        return load

    def log_tail(self) -> str:
        try:
            return tail(self.log_path.read_text(errors="replace"))
        except OSError:
            return ""

    def request(self, op: ChildOp, args: dict | None, what: str, timeout_s: float) -> ChildReply:
        """Send one request and return its reply; ChildTimeout / ChildDied / ChildForged otherwise."""
        try:
            self._send(op, args)
        except BrokenPipeError:
            raise self._died() from None
        return self._receive(what, timeout_s)

    def _send(self, op: ChildOp, args: dict | None) -> None:
        self.seq += 1
        self.channel.send(ChildRequest(op, self.seq, dict(args or {})).to_wire())

    def _receive(self, what: str, timeout_s: float) -> ChildReply:
        """The reply to the last request sent (ChildTimeout / ChildDied / ChildForged otherwise)."""
        try:
            return ChildReply.from_wire(self.channel.recv(timeout_s), self.seq, self.nonce)
        except ProtocolViolation as exc:
            self.kill()
            raise ChildForged(f"{what}: {exc}", self.log_tail()) from None
        except ChannelTimeout:
            self.kill()
            raise ChildTimeout(what, timeout_s, self.log_tail()) from None
        except (ChannelClosed, BrokenPipeError):
            raise self._died() from None

    def _died(self) -> ChildDied:
        code = self._wait(10.0)
        note = self.boxed.limit_note() if self.boxed is not None else None
        return ChildDied(note or describe_exit(code), self.log_tail())

    def parse(self, data: dict, parser: Callable[[dict], T], what: str) -> T:
        """A typed view of a reply's data; a malformed reply is forged (ChildForged), like a bad envelope."""
        try:
            return parser(data)
        except ProtocolViolation as exc:
            self.kill()
            raise ChildForged(f"{what}: {exc}", self.log_tail()) from None

    def mapped_libraries(self) -> list[str]:
        """Paths of the shared objects mapped right now into the child (/proc/PID/maps) and, in a sandbox,
        into every process it started there."""
        from ptxcore.gpu.harness.deps import parse_maps

        pids = self.boxed.member_pids() if self.boxed is not None else [self.proc.pid]
        found: list[str] = []
        for pid in pids:
            try:
                found += [p for p in parse_maps(Path(f"/proc/{pid}/maps").read_text()) if p not in found]
            except OSError:
                continue
        return found

    def returncode(self) -> int | None:
        """The child's exit status (negative: killed by that signal), None while it runs."""
        return self.boxed.exit_code() if self.boxed is not None else self.proc.poll()

    def _wait(self, timeout_s: float) -> int | None:
        try:
            self.proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            self.kill()
        return self.returncode()

    def kill(self) -> None:
        if self.boxed is not None and self.stage is not None:
            self.stage.kill(self.boxed)  # the sandbox's PID namespace: the child and all it started
            return
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                self.proc.kill()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            log.error("child %d did not die after SIGKILL", self.proc.pid)

    def close(self, graceful: bool = True) -> None:
        """End the child (`graceful`: asked to exit first) and remove its sandbox and working directory."""
        if graceful and self.proc.poll() is None:
            try:
                self.request(ChildOp.EXIT, None, "exit", 10.0)
            except (ChildTimeout, ChildDied, ChildForged, OSError):
                pass
            self._wait(10.0)
        self.kill()
        self.channel.close()
        if self.stage is not None:
            self.stage.__exit__(None, None, None)
        self.workdir.cleanup()
