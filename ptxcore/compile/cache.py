"""Content-addressed compile cache: same source + flags + toolkit -> no second nvcc run.

Entries are written to a temporary directory and renamed into place, and a per-key file lock keeps
two processes from compiling the same key at once, so concurrent compiles are safe.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

RESULT_FILE = "result.json"
ARTIFACT_FILE = "kernel.so"


def default_cache_dir() -> Path:
    env = os.environ.get("PTXBENCH_CACHE_DIR")
    if env:
        return Path(env) / "compile"
    return Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "ptxbench" / "compile"


def cache_key(source: str, flags: list[str], toolkit: str, abi_version: str) -> str:
    h = hashlib.sha256()
    for part in (source, "\0".join(flags), toolkit, abi_version):
        h.update(part.encode())
        h.update(b"\x1f")
    return h.hexdigest()


class CompileCache:
    """A directory of `<key>/{result.json, kernel.so}` entries."""

    def __init__(self, root: Path | None = None) -> None:
        self.root = Path(root) if root is not None else default_cache_dir()
        self.root.mkdir(parents=True, exist_ok=True)

    def entry(self, key: str) -> Path:
        return self.root / key[:2] / key

    def load(self, key: str) -> tuple[dict, Path | None] | None:
        entry = self.entry(key)
        result = entry / RESULT_FILE
        if not result.is_file():
            return None
        artifact = entry / ARTIFACT_FILE
        return json.loads(result.read_text()), (artifact if artifact.is_file() else None)

    @contextlib.contextmanager
    def locked(self, key: str) -> Iterator[None]:
        lock_path = self.root / key[:2] / f"{key}.lock"
        lock_path.parent.mkdir(parents=True, exist_ok=True)
        with open(lock_path, "w") as fh:
            fcntl.flock(fh, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(fh, fcntl.LOCK_UN)

    def workdir(self) -> Path:
        return Path(tempfile.mkdtemp(prefix="build-", dir=self.root))

    def publish(self, key: str, workdir: Path, result: dict) -> Path:
        """Atomically move a finished build into place; returns the entry directory."""
        (workdir / RESULT_FILE).write_text(json.dumps(result, indent=1))
        entry = self.entry(key)
        entry.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.rename(workdir, entry)
        except OSError:  # another process published first: keep theirs
            shutil.rmtree(workdir, ignore_errors=True)
        return entry
