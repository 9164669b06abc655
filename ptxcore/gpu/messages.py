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
from enum import StrEnum
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

    def get(self, key: str, default: Any = None) -> Any:
        """Reply fields by name (`ok`, `error`, `stage` and the op's data)."""
        if key in ("ok", "seq", "nonce", "stage", "error"):
            return getattr(self, key)
        return self.data.get(key, default)


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
