"""Resource limits: a tiny pre-exec step that calls setrlimit (and drops root to nobody), then execs bwrap.

It runs as its own short Python process (`python -I -S -c`, ~10 ms) instead of a `preexec_fn`, which the
subprocess documentation calls unsafe in a process with threads (Prefect runs tasks in threads). Limits
are inherited by bwrap and by every process of the sandbox.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from .models import Limits

_TRAMPOLINE = """\
import os, resource, sys
uid, n = int(sys.argv[1]), int(sys.argv[2])
for item in sys.argv[3:3 + n]:
    name, value = item.split("=")
    which, value = getattr(resource, name), int(value)
    hard = resource.getrlimit(which)[1]
    value = value if hard == resource.RLIM_INFINITY else min(value, hard)
    resource.setrlimit(which, (value, value))
if uid != os.getuid():
    os.setgroups([])
    os.setgid(uid)
    os.setuid(uid)
os.execv(sys.argv[3 + n], sys.argv[3 + n:])
"""


def _tasks_of_uid(uid: int) -> int:
    """Processes and threads whose real uid is `uid` (what RLIMIT_NPROC counts)."""
    total = 0
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            status = (entry / "status").read_text()
        except OSError:
            continue
        fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
        if int(fields.get("Uid", "-1").split()[0]) == uid:
            total += int(fields.get("Threads", "1").strip() or 1)
    return total


def rlimit_settings(limits: Limits, uid: int) -> list[str]:
    """`RLIMIT_X=value` items for the trampoline."""
    items = ["RLIMIT_CORE=0"]
    if limits.address_space_bytes is not None:
        items.append(f"RLIMIT_AS={limits.address_space_bytes}")
    if limits.file_size_bytes is not None:
        items.append(f"RLIMIT_FSIZE={limits.file_size_bytes}")
    if limits.cpu_time_s is not None:
        items.append(f"RLIMIT_CPU={limits.cpu_time_s}")
    if limits.open_files is not None:
        items.append(f"RLIMIT_NOFILE={limits.open_files}")
    if limits.processes is not None and uid != 0:  # the kernel never applies RLIMIT_NPROC to uid 0
        items.append(f"RLIMIT_NPROC={limits.processes + _tasks_of_uid(uid)}")
    return items


def with_limits(argv: list[str], limits: Limits, uid: int) -> list[str]:
    """`argv` prefixed by the trampoline: setrlimit, then (from root) become `uid`, then exec."""
    items = rlimit_settings(limits, uid)
    return [sys.executable, "-I", "-S", "-c", _TRAMPOLINE, str(uid), str(len(items)), *items, *argv]


def effective_uid(as_nobody: bool) -> int:
    return 65534 if as_nobody else os.getuid()

