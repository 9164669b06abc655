"""Typed messages of the two pipes in the GPU rooms (stdlib only: the candidate child imports this).

judge <-> candidate child: JSON lines over dedicated pipe fds (`Channel`). The judge opens every session
with a random nonce; every request carries the next sequence number and every reply echoes both. A reply
that does not (a candidate writing to a descriptor it inherited) is a `ProtocolViolation`, never data.
The candidate's own stdout/stderr go to a log file, so nothing it prints reaches the judge as a reply.

service <-> GPU worker: length-prefixed JSON (multiprocessing Connection) between two processes that only
run our code; `WorkerRequest` / `WorkerReply` name its messages.
"""

from __future__ import annotations

import json
import os
import secrets
import select
import time
from dataclasses import dataclass, field
from enum import IntEnum, StrEnum
from typing import Any


class ChannelClosed(EOFError):
    """The other side closed its end (usually: the child died)."""


class ChannelTimeout(TimeoutError):
    """No reply within the deadline."""


class ProtocolViolation(RuntimeError):
    """A message that the judge's side of the protocol did not expect (forged, out of order, malformed)."""


class Channel:
    """Line-delimited JSON over a pair of raw fds."""

    MAX_LINE_BYTES = 64 << 20

    def __init__(self, read_fd: int, write_fd: int) -> None:
        self.read_fd, self.write_fd = read_fd, write_fd
        self._buf = b""

    def send(self, msg: dict) -> None:
        data = (json.dumps(msg, separators=(",", ":")) + "\n").encode()
        while data:
            n = os.write(self.write_fd, data)
            data = data[n:]

    def recv(self, timeout_s: float | None = None) -> dict:
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        while b"\n" not in self._buf:
            if len(self._buf) > self.MAX_LINE_BYTES:
                raise ProtocolViolation(f"a message longer than {self.MAX_LINE_BYTES} bytes")
            wait = None if deadline is None else max(0.0, deadline - time.monotonic())
            ready, _, _ = select.select([self.read_fd], [], [], wait)
            if not ready:
                raise ChannelTimeout(f"no reply within {timeout_s:.1f} s")
            chunk = os.read(self.read_fd, 1 << 16)
            if not chunk:
                raise ChannelClosed("channel closed")
            self._buf += chunk
        line, self._buf = self._buf.split(b"\n", 1)
        try:
            msg = json.loads(line)
        except ValueError as exc:
            raise ProtocolViolation(f"a message that is not JSON: {line[:80]!r}") from exc
        if not isinstance(msg, dict):
            raise ProtocolViolation(f"a message that is not an object: {line[:80]!r}")
        return msg

    def close(self) -> None:
        for fd in (self.read_fd, self.write_fd):
            try:
                os.close(fd)
            except OSError:
                pass


# ---- judge <-> candidate child ------------------------------------------------------------------------

class SessionMode(StrEnum):
    """What a child session runs."""

    FFI = "ffi"
    """A candidate's TVM-FFI build (sandboxed; torch and cupy are kept out of the process)."""
    TRITON = "triton"
    """A candidate's Triton kernel.py (sandboxed; runs on torch)."""
    BASELINE = "baseline"
    """The trusted baseline library (not sandboxed)."""

    @property
    def is_candidate(self) -> bool:
        return self is not SessionMode.BASELINE


class ChildExit(IntEnum):
    """Exit codes of a child session."""

    OK = 0
    REQUEST_FAILED = 3
    """A request failed (the candidate's fault: reported to the judge as a failed reply first)."""
    INIT_FAILED = 4
    """The session could not start (driver, CUPTI): an infrastructure fault."""


class ChildOp(StrEnum):
    HELLO = "hello"
    """Opens the session: carries the nonce; the child answers with its pid."""
    LOAD = "load"
    """Load the candidate (mode ffi: `library`; mode triton: `source`, `triton_cache`) or the trusted baseline
    (mode baseline: `problem`)."""
    BIND = "bind"
    """Map a buffer slot's tensors by CUDA IPC (`slot`, `tensors`, `outputs`)."""
    CALL = "call"
    """One synchronised call on a slot (`slot`, `tag`)."""
    UNBIND = "unbind"
    TIMINGS = "timings"
    """Drain the CUPTI records and attribute them to the calls."""
    LAUNCHES = "launches"
    """Mode triton: the Triton launch report of the first (recorded) calls."""
    EXIT = "exit"


def new_nonce() -> str:
    return secrets.token_hex(16)


@dataclass(frozen=True)
class ChildRequest:
    """One request of the judge. `args` stay a dict (their keys per op on ChildOp; issue 32, weighed and kept): the
    judge writes them and our child harness reads them, both sides our own code, changed together. What comes
    back from the candidate's process is where a forged or malformed payload can come from, so that is typed and
    checked: CallReply, TimingsReply and TimingRow here, the Triton launch report reduced to well-typed fields
    (pipeline.session._launch_report)."""

    op: ChildOp
    seq: int
    args: dict[str, Any] = field(default_factory=dict)

    def to_wire(self) -> dict[str, Any]:
        return {**self.args, "op": self.op.value, "seq": self.seq}

    @classmethod
    def from_wire(cls, msg: dict[str, Any]) -> ChildRequest:
        args = {k: v for k, v in msg.items() if k not in ("op", "seq")}
        return cls(ChildOp(msg["op"]), int(msg["seq"]), args)


@dataclass(frozen=True)
class ChildReply:
    """`ok` replies carry op-specific `data`; failed ones the `stage` and `error` text."""

    ok: bool
    seq: int
    nonce: str
    data: dict[str, Any] = field(default_factory=dict)
    stage: str | None = None
    error: str | None = None

    def to_wire(self) -> dict[str, Any]:
        out = {**self.data, "ok": self.ok, "seq": self.seq, "nonce": self.nonce}
        if not self.ok:
            out.update(stage=self.stage, error=self.error)
        return out

    @classmethod
    def from_wire(cls, msg: dict[str, Any], seq: int, nonce: str) -> ChildReply:
        """Validate against the request it answers; ProtocolViolation for anything else."""
        if msg.get("nonce") != nonce or msg.get("seq") != seq or not isinstance(msg.get("ok"), bool):
            raise ProtocolViolation(f"a reply that does not answer request {seq} of this session "
                                    "(written by something other than the judge's child harness)")
        data = {k: v for k, v in msg.items() if k not in ("ok", "seq", "nonce", "stage", "error")}
        return cls(msg["ok"], seq, nonce, data, msg.get("stage"), msg.get("error"))

    @property
    def fault(self) -> str | None:
        """A failed Triton candidate's own classification (COMPILE_ERROR / RUNTIME_ERROR), if it gave one."""
        value = self.data.get("fault")
        return value if isinstance(value, str) else None


@dataclass(frozen=True)
class CallReply:
    """The child's answer to CALL (claims: the judge keeps its own window of the call)."""

    wall_ns: int
    """The child's own host time around the call."""
    l2_reset: bool
    """The child found and cleared a persisting-L2 set-aside after the call."""

    def to_wire(self) -> dict[str, Any]:
        return {"wall_ns": self.wall_ns, "l2_reset": self.l2_reset}

    @classmethod
    def from_data(cls, data: dict[str, Any]) -> CallReply:
        wall = data.get("wall_ns")
        return cls(wall if isinstance(wall, int) and wall >= 0 else 0, data.get("l2_reset") is True)


@dataclass(frozen=True)
class TimingRow:
    """What the child's CUPTI records say one call ran (a claim the judge audits with its own meter)."""

    tag: int
    span_ns: int
    records: int
    kernels: int
    off_stream: tuple[str, ...] = ()
    kernel_names: tuple[str, ...] = ()
    active_ns: int = 0
    """The union of the call's record intervals (CallTiming.active_ns)."""

    def to_wire(self) -> dict[str, Any]:
        return {"tag": self.tag, "span_ns": self.span_ns, "records": self.records, "kernels": self.kernels,
                "off_stream": list(self.off_stream), "kernel_names": list(self.kernel_names),
                "active_ns": self.active_ns}

    @classmethod
    def from_wire(cls, row: Any) -> TimingRow:
        """ProtocolViolation for a row that is not one (it comes from the candidate's process)."""
        if not isinstance(row, dict):
            raise ProtocolViolation("a timing row that is not an object")
        ints = [row.get(k) for k in ("tag", "span_ns", "records", "kernels")]
        if not all(isinstance(v, int) and not isinstance(v, bool) for v in ints) or min(ints[1:]) < 0:
            raise ProtocolViolation("a timing row with non-integer or negative counts")
        names = [row.get("off_stream", []), row.get("kernel_names", [])]
        if not all(isinstance(n, list) and all(isinstance(x, str) for x in n) for n in names):
            raise ProtocolViolation("a timing row whose names are not strings")
        active = row.get("active_ns", 0)
        if not isinstance(active, int) or isinstance(active, bool) or not 0 <= active <= ints[1]:
            raise ProtocolViolation("a timing row whose covered time is not an integer between 0 and its span")
        return cls(*ints, tuple(names[0]), tuple(names[1]), active)


@dataclass(frozen=True)
class TimingsReply:
    """The child's answer to TIMINGS: per-call rows, the environment stream ids, stray activity names."""

    env_streams: tuple[int, ...]
    calls: tuple[TimingRow, ...]
    stray: tuple[str, ...] = ()

    def to_wire(self) -> dict[str, Any]:
        return {"env_streams": list(self.env_streams), "calls": [c.to_wire() for c in self.calls],
                "stray": list(self.stray)}

    @classmethod
    def from_data(cls, data: dict[str, Any]) -> TimingsReply:
        streams, calls, stray = data.get("env_streams", []), data.get("calls", []), data.get("stray", [])
        if not isinstance(streams, list) or not all(isinstance(x, int) for x in streams):
            raise ProtocolViolation("environment stream ids that are not integers")
        if not isinstance(calls, list) or not isinstance(stray, list):
            raise ProtocolViolation("a timings reply without lists")
        return cls(tuple(streams), tuple(TimingRow.from_wire(c) for c in calls),
                   tuple(str(x)[:200] for x in stray[:20]))


# ---- service <-> GPU worker ---------------------------------------------------------------------------

class WorkerOp(StrEnum):
    RUN = "run"
    HEALTH = "health"
    SHUTDOWN = "shutdown"


class WorkerReplyType(StrEnum):
    READY = "ready"
    PHASE = "phase"
    RESULT = "result"
    ENGINE_ERROR = "engine_error"
    HEALTH = "health"


@dataclass(frozen=True)
class WorkerRequest:
    op: WorkerOp
    item: dict[str, Any] | None = None

    def to_wire(self) -> dict[str, Any]:
        return {"op": self.op.value, **({"item": self.item} if self.item is not None else {})}


@dataclass(frozen=True)
class WorkerReply:
    type: WorkerReplyType
    payload: dict[str, Any] = field(default_factory=dict)

    def to_wire(self) -> dict[str, Any]:
        return {"type": self.type.value, **self.payload}

    @classmethod
    def from_wire(cls, msg: dict[str, Any]) -> WorkerReply:
        return cls(WorkerReplyType(msg["type"]), {k: v for k, v in msg.items() if k != "type"})
