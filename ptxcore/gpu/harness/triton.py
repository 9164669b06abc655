"""Judge side of a Triton candidate's files: one private workspace per judgement, shared by its processes.

    with TritonFiles.create(source) as files:     # <tmp>/kernel.py (read-only) and <tmp>/triton-cache/
        load = files.load_message()               # the session child's LOAD request
        candidate_args(files)                     # the memcheck / ncu child's candidate arguments

The session child, the memcheck run and the ncu run of one candidate all use the same Triton cache, so the
cubins (and autotuning choices: TRITON_CACHE_AUTOTUNING) the session compiled are the ones memcheck checks and
Nsight Compute counts, and the judge reads the launched cubins from it after the session (hashes verified by
ptxcore.triton.evidence). The workspace lives outside any child's own scratch because it outlives the session
child (ncu runs after it); it is removed when the judgement ends. Nothing in it is ever imported here.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

SOURCE_NAME = "kernel.py"
CACHE_NAME = "triton-cache"


@dataclass(frozen=True)
class TritonFiles:
    """A candidate's kernel.py and its private Triton cache."""

    root: Path
    """The workspace directory (mode 0700)."""

    @property
    def source(self) -> Path:
        return self.root / SOURCE_NAME

    @property
    def cache(self) -> Path:
        return self.root / CACHE_NAME

    @classmethod
    def create(cls, source: str, parent: Path | None = None) -> TritonFiles:
        root = Path(tempfile.mkdtemp(prefix="ptxbench-triton-", dir=parent))
        files = cls(root)
        files.source.write_text(source)
        files.source.chmod(0o444)
        files.cache.mkdir(mode=0o700)
        return files

    def load_message(self) -> dict:
        """The session child's LOAD arguments (the session's mode, triton, is its command line's)."""
        return {"source": str(self.source), "triton_cache": str(self.cache)}

    def remove(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> TritonFiles:
        return self

    def __exit__(self, *exc: object) -> None:
        self.remove()


def candidate_args(candidate: Path | TritonFiles) -> list[str]:
    """How a standalone child (sanitize / profile) is told its candidate: a TVM-FFI library or Triton files."""
    if isinstance(candidate, TritonFiles):
        return ["--triton-source", str(candidate.source), "--triton-cache", str(candidate.cache)]
    return ["--library", os.fspath(candidate)]
