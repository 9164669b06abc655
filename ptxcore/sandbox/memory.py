"""MemoryWatch: a limit on the resident memory of all of a sandbox's processes together, enforced from outside.

bubblewrap sets no cgroup, and whether a cgroup can be made differs by host (the CPU machines have a cgroup v1
hierarchy we may not write; the GPU host is root in a VM), while an address-space limit breaks CUDA, which
reserves huge virtual ranges. So a thread sums the resident pages (/proc/PID/statm) of every process of the
sandbox every `interval_s` (the members found again every `rescan_s`) and kills the whole sandbox above the
limit. It bounds growth, not a spike shorter than one interval (the kernel's OOM killer stays the backstop); a
page shared by several processes counts once for each. Its cost: benchmarks/sandbox_watch_cost.py.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path

log = logging.getLogger(__name__)

GIB = 1 << 30
PAGE_BYTES = os.sysconf("SC_PAGE_SIZE")
JOIN_WAIT_S = 10.0


def resident_bytes(pid: int) -> int:
    """Resident memory of one process (0 when it is gone or unreadable)."""
    try:
        return int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * PAGE_BYTES
    except (OSError, ValueError, IndexError):
        return 0


class MemoryWatch:
    """Calls `kill` once the processes `members` names hold more than `limit` resident bytes together, while
    `alive` says the sandbox runs. `tripped_at` is the sum that tripped it (None: it never did)."""

    def __init__(self, members: Callable[[], list[int]], alive: Callable[[], bool], kill: Callable[[], None],
                 limit: int, interval_s: float = 0.05, rescan_s: float = 0.5) -> None:
        self.members, self.alive, self.kill = members, alive, kill
        self.limit, self.interval_s, self.rescan_s = limit, interval_s, rescan_s
        self.tripped_at: int | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="sandbox-memory-watch", daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        # Finding the members reads every process of the host (a few ms); their statm is microseconds. So the
        # members are found again every `rescan_s` (a new process is counted from then on) and read every poll.
        members: list[int] = []
        scanned = 0.0
        while not self._stop.wait(self.interval_s) and self.alive():
            if time.monotonic() - scanned >= self.rescan_s:
                members, scanned = self.members(), time.monotonic()
            total = sum(resident_bytes(pid) for pid in members)
            if total > self.limit:
                self.tripped_at = total
                log.warning("sandbox memory limit: %.2f GiB resident > %.2f GiB; killing it",
                            total / GIB, self.limit / GIB)
                self.kill()
                return

    def stop(self) -> None:
        self._stop.set()
        if threading.current_thread() is not self._thread:
            self._thread.join(timeout=JOIN_WAIT_S)
