"""Resource limits: a tiny pre-exec step that calls setrlimit (and drops root to nobody), then execs bwrap.

It runs as its own short Python process (`python -I -S -c`, ~10 ms) instead of a `preexec_fn`, which the
subprocess documentation calls unsafe in a process with threads (Prefect runs tasks in threads). Limits
are inherited by bwrap and by every process of the sandbox. Before it drops root, it binds the sources
nobody cannot reach onto their staging points in a private mount namespace of its own (reach.py); when that
fails it exits 125 with one line on stderr, and bwrap never starts.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from pathlib import Path

from .models import Limits

_TRAMPOLINE = """\
import os, resource, sys
uid, n, m = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
items, binds, argv = sys.argv[4:4 + n], sys.argv[4 + n:4 + n + 2 * m], sys.argv[4 + n + 2 * m:]
for item in items:
    name, value = item.split("=")
    which, value = getattr(resource, name), int(value)
    hard = resource.getrlimit(which)[1]
    value = value if hard == resource.RLIM_INFINITY else min(value, hard)
    resource.setrlimit(which, (value, value))
if binds:
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_void_p]
    def must(rc, what):
        if rc != 0:
            sys.stderr.write("sandbox staging: %s: %s\\n" % (what, os.strerror(ctypes.get_errno())))
            os._exit(125)
    must(libc.unshare(0x00020000), "unshare(CLONE_NEWNS)")
    must(libc.mount(None, b"/", None, 0x4000 | 0x40000, None), "mount --make-rprivate /")
    for src, dst in zip(binds[0::2], binds[1::2]):
        must(libc.mount(os.fsencode(src), os.fsencode(dst), None, 0x1000 | 0x4000, None), "bind " + src)
if uid != os.getuid():
    os.setgroups([])
    os.setgid(uid)
    os.setuid(uid)
os.execv(argv[0], argv)
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


def with_limits(argv: list[str], limits: Limits, uid: int, binds: Sequence[tuple[str, str]] = ()) -> list[str]:
    """`argv` prefixed by the trampoline: setrlimit, then (from root) bind each (host path, staging point) of
    `binds` in a private mount namespace, become `uid`, and exec."""
    items = rlimit_settings(limits, uid)
    pairs = [part for bind in binds for part in bind]
    return [sys.executable, "-I", "-S", "-c", _TRAMPOLINE, str(uid), str(len(items)), str(len(binds)), *items,
            *pairs, *argv]


def effective_uid(as_nobody: bool) -> int:
    return 65534 if as_nobody else os.getuid()

