"""Content-addressed compile cache, checked on every read.

An entry `<root>/<kk>/<key>/` holds result.json, sass.json, deps.json, kernel.so (when compiled) and
manifest.json with the sha256 of each. `lookup` verifies every hash, parses every file and checks that each
recorded dependency (every header the build entered) still has its recorded content. A corrupt, tampered,
half-written or stale entry is a miss: logged, removed under the key's lock, rebuilt - never a traceback and
never a wrong verdict. Entries are assembled in a staging directory and renamed into place; a per-key file
lock keeps two processes from building one key at once.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import logging
import os
import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from pydantic import ValidationError

from ptxcore.schema import CompileResult, SassReport

from .includes import Dependency, dependencies_current

log = logging.getLogger(__name__)

RESULT_FILE = "result.json"
ARTIFACT_FILE = "kernel.so"
SASS_FILE = "sass.json"
DEPS_FILE = "deps.json"
MANIFEST_FILE = "manifest.json"


def default_cache_dir() -> Path:
    env = os.environ.get("PTXBENCH_CACHE_DIR")
    if env:
        return Path(env) / "compile"
    return Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "ptxbench" / "compile"


def cache_key(source: str, flags: list[str], toolkit: str, abi_version: str, *more: str) -> str:
    """sha256 over the parts, each terminated (no part can run into the next)."""
    h = hashlib.sha256()
    for part in (source, "\0".join(flags), toolkit, abi_version, *more):
        h.update(part.encode("utf-8", errors="surrogatepass"))
        h.update(b"\x1f")
    return h.hexdigest()


def file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


@dataclass(frozen=True)
class CachedBuild:
    """A verified cache entry."""

    result: CompileResult
    artifact: Path | None
    sass: SassReport | None
    deps: list[Dependency]


class CorruptEntry(Exception):
    """Why an entry cannot be used (internal: becomes a logged miss)."""


class CompileCache:
    """A directory of verified `<key>/` entries (see the module docstring)."""

    def __init__(self, root: Path | None = None) -> None:
        self.root = Path(root) if root is not None else default_cache_dir()
        self.root.mkdir(parents=True, exist_ok=True)

    def entry(self, key: str) -> Path:
        return self.root / key[:2] / key

    def lookup(self, key: str, *, remove_bad: bool = False) -> CachedBuild | None:
        """The verified entry of `key`, or None (absent, corrupt or stale; removed when `remove_bad`,
        which the caller may ask for only while it holds the key's lock)."""
        entry = self.entry(key)
        if not entry.exists():
            return None
        try:
            return self._verified(key, entry)
        except (CorruptEntry, OSError, ValueError, ValidationError) as exc:
            log.warning("compile cache entry %s unusable (%s): rebuilding", key[:16], str(exc).splitlines()[0])
            if remove_bad:
                self._discard(entry)
            return None

    def _verified(self, key: str, entry: Path) -> CachedBuild:
        manifest = json.loads((entry / MANIFEST_FILE).read_text())
        if manifest.get("key") != key or not isinstance(manifest.get("files"), dict):
            raise CorruptEntry("manifest does not belong to this key")
        files: dict[str, str] = manifest["files"]
        if RESULT_FILE not in files or DEPS_FILE not in files:
            raise CorruptEntry("manifest lists no result or dependency file")
        for name, digest in files.items():
            path = entry / name
            if os.path.basename(name) != name or path.is_symlink() or file_sha256(path) != digest:
                raise CorruptEntry(f"{name} does not match its recorded hash")
        result = CompileResult.model_validate_json((entry / RESULT_FILE).read_text())
        deps = [Dependency(**d) for d in json.loads((entry / DEPS_FILE).read_text())]
        if not dependencies_current(deps):
            raise CorruptEntry("an included header changed since the build")
        sass = (SassReport.model_validate_json((entry / SASS_FILE).read_text())
                if SASS_FILE in files else None)
        artifact = entry / ARTIFACT_FILE if ARTIFACT_FILE in files else None
        if (artifact is not None) != (result.status.value == "COMPILED"):
            raise CorruptEntry("artifact presence does not match the status")
        return CachedBuild(result, artifact, sass, deps)

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

    def staging(self) -> Path:
        """A fresh directory to assemble an entry in (same file system as the entries)."""
        return Path(tempfile.mkdtemp(prefix="build-", dir=self.root))

    def publish(self, key: str, staging: Path, result: CompileResult, deps: list[Dependency],
                sass: SassReport | None) -> Path:
        """Write the entry's files and manifest in `staging` and move it into place (replacing a stale
        entry); call while holding the key's lock. Returns the entry directory."""
        (staging / RESULT_FILE).write_text(result.model_dump_json(indent=1))
        (staging / DEPS_FILE).write_text(json.dumps([d.__dict__ for d in deps], indent=1))
        if sass is not None:
            (staging / SASS_FILE).write_text(sass.model_dump_json(indent=1))
        names = [n for n in (RESULT_FILE, DEPS_FILE, SASS_FILE, ARTIFACT_FILE) if (staging / n).is_file()]
        manifest = {"key": key, "files": {n: file_sha256(staging / n) for n in names}}
        (staging / MANIFEST_FILE).write_text(json.dumps(manifest, indent=1))
        entry = self.entry(key)
        entry.parent.mkdir(parents=True, exist_ok=True)
        if entry.exists():
            self._discard(entry)
        os.rename(staging, entry)
        return entry

    def _discard(self, entry: Path) -> None:
        trash = entry.with_name(f"{entry.name}.discard-{os.getpid()}")
        try:
            os.rename(entry, trash)
        except OSError:
            return
        shutil.rmtree(trash, ignore_errors=True)
