"""The service's work directory: the only place it writes. Paths are derived from hashes and GPU
indices, never from request fields, and every derived path is checked to stay inside the directory."""

from __future__ import annotations

import os
import re
from pathlib import Path

from ptxcore.schema import text_sha256

_SHA256 = re.compile(r"[0-9a-f]{64}")


class WorkDirError(ValueError):
    """A derived path would leave the work directory, or a key is malformed."""


class WorkDir:
    """Layout: tasks.sqlite3, sources/<aa>/<sha256>.cu, workers/gpu<N>/ (scratch, logs)."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root).resolve()
        self.root.mkdir(parents=True, exist_ok=True)
        (self.root / "sources").mkdir(exist_ok=True)
        (self.root / "workers").mkdir(exist_ok=True)

    def inside(self, path: Path) -> Path:
        """`path` resolved, or WorkDirError when it is not under the root."""
        resolved = Path(path).resolve()
        if resolved != self.root and self.root not in resolved.parents:
            raise WorkDirError(f"{path} is outside the work directory")
        return resolved

    @property
    def store_path(self) -> Path:
        return self.root / "tasks.sqlite3"

    def source_path(self, sha256: str) -> Path:
        if not _SHA256.fullmatch(sha256):
            raise WorkDirError(f"not a sha256: {sha256!r}")
        return self.inside(self.root / "sources" / sha256[:2] / f"{sha256}.cu")

    def write_source(self, text: str) -> str:
        """Store a candidate by content hash (idempotent, atomic); returns the hash."""
        sha = text_sha256(text)
        path = self.source_path(sha)
        if not path.exists():
            path.parent.mkdir(exist_ok=True)
            tmp = path.with_suffix(f".tmp{os.getpid()}")
            tmp.write_text(text)
            os.replace(tmp, path)
        return sha

    def read_source(self, sha256: str) -> str:
        return self.source_path(sha256).read_text()

    def worker_dir(self, gpu: int) -> Path:
        if not isinstance(gpu, int) or gpu < 0:
            raise WorkDirError(f"bad GPU index {gpu!r}")
        path = self.inside(self.root / "workers" / f"gpu{gpu}")
        path.mkdir(exist_ok=True)
        return path
