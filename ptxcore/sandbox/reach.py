"""Host paths the sandbox's unprivileged user cannot reach, and the staging points it reaches them by.

As root, the sandbox becomes nobody before bubblewrap starts (limits.py), so bubblewrap resolves every bind
source as nobody. A source below a directory nobody may not search (a Python installed under /root, mode 0700;
a Triton candidate's private workspace; a bwrap carried into a private home) could not be bound, and the
sandbox would have had to run as root. Instead the trampoline, while still root, enters a private mount
namespace of its own and binds each such source onto a staging point under the sandbox's root directory
(which nobody reaches); bubblewrap, as nobody, binds the staging point at the source's usual place inside.

The staged binds live only in the mount namespace of that one sandbox's process tree (propagation private:
the host's mount table never sees them) and disappear with it. Inside the sandbox the same paths show the
same files as before, and no staging point is visible (bubblewrap's root replaces the namespace's).
"""

from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path

STAGE_DIR = "reach"
"""The folder of staging points inside a sandbox's root directory (beside files/ and tmp/)."""


def _searchable(directory: str, uid: int, gid: int) -> bool:
    try:
        st = os.stat(directory)
    except OSError:
        return False
    if st.st_uid == uid:
        return bool(st.st_mode & stat.S_IXUSR)
    if st.st_gid == gid:  # the sandbox's user has no supplementary groups (setgroups([]))
        return bool(st.st_mode & stat.S_IXGRP)
    return bool(st.st_mode & stat.S_IXOTH)


def blocked(path: str, uid: int, gid: int) -> bool:
    """True when a directory on the way to `path` (as written, or to its real path) denies `uid` search."""
    ways = {Path(os.path.abspath(path)), Path(os.path.realpath(path))}
    return any(not _searchable(str(parent), uid, gid) for way in ways for parent in way.parents)


class Reach:
    """Staging points for one sandbox start: `source(path)` is what bubblewrap should bind instead of `path`,
    `binds` the (host path, staging point) pairs the trampoline mounts first."""

    def __init__(self, root: Path, uid: int, gid: int) -> None:
        self.root, self.uid, self.gid = root / STAGE_DIR, uid, gid
        self.binds: list[tuple[str, str]] = []
        self._staged: dict[str, str] = {}

    def source(self, path: str) -> str:
        """`path` itself when the sandbox's user reaches it, else its staging point (made on first use)."""
        if path in self._staged:
            return self._staged[path]
        if not os.path.exists(path) or not blocked(path, self.uid, self.gid):
            return path  # a missing optional source stays as it is: bubblewrap's -try skips it
        if not self.root.exists():
            self.root.mkdir(exist_ok=True)
            self.root.chmod(0o755)  # root's; nobody searches it, and nothing in it is writable
        if os.path.isdir(path):  # a fresh name per point: one sandbox root serves several starts
            point = tempfile.mkdtemp(prefix="d", dir=self.root)
        else:
            fd, point = tempfile.mkstemp(prefix="f", dir=self.root)
            os.close(fd)
        self.binds.append((path, point))
        self._staged[path] = point
        return point

    def executable(self, path: str) -> str:
        """A program the sandbox's user must start (bwrap): its folder staged when it is out of reach, since a
        wrapper script loads its binary and libraries from beside itself."""
        if not blocked(path, self.uid, self.gid):
            return path
        real = Path(os.path.realpath(path))
        return str(Path(self.source(str(real.parent))) / real.name)
