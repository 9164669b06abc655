"""JSON-lines messages between the judge and its isolated child, over dedicated pipe fds.

The candidate's own stdout/stderr go to a log file, so nothing it prints can forge a reply.
"""

from __future__ import annotations

import json
import os
import select
import time


class ChannelClosed(EOFError):
    """The other side closed its end (usually: the child died)."""


class ChannelTimeout(TimeoutError):
    """No reply within the deadline."""


class Channel:
    """Line-delimited JSON over a pair of raw fds."""

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
            wait = None if deadline is None else max(0.0, deadline - time.monotonic())
            ready, _, _ = select.select([self.read_fd], [], [], wait)
            if not ready:
                raise ChannelTimeout(f"no reply within {timeout_s:.1f} s")
            chunk = os.read(self.read_fd, 1 << 16)
            if not chunk:
                raise ChannelClosed("channel closed")
            self._buf += chunk
        line, self._buf = self._buf.split(b"\n", 1)
        return json.loads(line)

    def close(self) -> None:
        for fd in (self.read_fd, self.write_fd):
            try:
                os.close(fd)
            except OSError:
                pass
