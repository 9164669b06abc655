"""The static device-code facts of a built object, read while the build's gate runs.

`cuobjdump --dump-sass` of the shared object (the static SASS verdict) and `cuobjdump -xelf` (the device-code
hash) are external processes: they start as soon as a successful build's object is copied out of the sandbox
(`DeviceCodeReader.start`, the `on_object` of ptxcore.compile.build.sandboxed_build) and run beside the
include/directive gate and the import check, which are Python. Their results are read only for a COMPILED build;
a refused build's readers are waited for and their output dropped. A tool failure raises (SassDumpError), as it
did when run in line.

The SASS text is the whole object's dump, read fatbinary by fatbinary when the object holds them the plain way
(ptxcore.compile.fatbin): cuobjdump's dump of such an object is the dumps of its fatbinaries in order, and each
one costs a disassembler start (about 0.3 s). The kernel's fatbinary is dumped while the host compile still runs
(`prefetch`, from a copy taken once nvcc's fatbinary step has exited), and a fatbinary already dumped in this
process (the device link's, the same bytes for every candidate) is not dumped again: the text of a dump is used
only for a fatbinary of the finished object with exactly the bytes dumped (sha256). Any other object is dumped
whole, as before (issue 27).
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import stat
import tempfile
import threading
from collections import OrderedDict
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from types import TracebackType

from ptxcore.arch import Architecture
from ptxcore.sass import SassDumpError, classify, dump_sass, parse_sass
from ptxcore.sass.verdict import device_code_sha256
from ptxcore.schema import SassReport

from .fatbin import plain_fatbins

log = logging.getLogger(__name__)

MAX_FATBIN_BYTES = 256 << 20
"""Largest fatbinary copied out ahead (a kernel's is tens of KiB to a few MiB)."""
MEMO_ENTRIES = 32
"""Dumps of fatbinaries kept in this process, most recent first (the device link's is every build's)."""


class DumpMemo:
    """The `cuobjdump --dump-sass` text of fatbinaries this process dumped, by the sha256 of their bytes."""

    def __init__(self, entries: int = MEMO_ENTRIES) -> None:
        self._entries = entries
        self._texts: OrderedDict[str, str] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, sha: str) -> str | None:
        with self._lock:
            text = self._texts.get(sha)
            if text is not None:
                self._texts.move_to_end(sha)
            return text

    def put(self, sha: str, text: str) -> None:
        with self._lock:
            self._texts[sha] = text
            self._texts.move_to_end(sha)
            while len(self._texts) > self._entries:
                self._texts.popitem(last=False)


MEMO = DumpMemo()


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _read_regular(path: Path, limit: int) -> bytes | None:
    """The bytes of a regular file no larger than `limit`, never following a link; None otherwise."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as fh:
        info = os.fstat(fh.fileno())
        if not stat.S_ISREG(info.st_mode) or info.st_size > limit:
            return None
        data = fh.read(limit + 1)
    return data if len(data) <= limit else None


class DeviceCodeReader:
    """Reads one object's SASS and device-code hash in background threads (each waits on its tool)."""

    def __init__(self, memo: DumpMemo | None = None) -> None:
        self._pool = ThreadPoolExecutor(max_workers=3, thread_name_prefix="device-code")
        self._memo = memo if memo is not None else MEMO
        self._tmp = Path(tempfile.mkdtemp(prefix="device-code-"))
        self._ahead: dict[str, Future[str]] = {}
        self._sass: Future[str] | None = None
        self._hash: Future[str] | None = None

    def prefetch(self, fatbin: Path) -> None:
        """Start dumping a copy of the fatbinary at `fatbin` (a file nvcc finished writing; read without following
        links); nothing when it is no regular file of sane size. Only ever a head start: see the module docstring."""
        data = _read_regular(fatbin, MAX_FATBIN_BYTES)
        if data is None:
            log.info("no fatbinary to dump ahead at %s", fatbin.name)
            return
        sha = _sha256(data)
        if sha in self._ahead or self._memo.get(sha) is not None:
            return
        copy = self._tmp / f"ahead-{len(self._ahead)}.fatbin"
        copy.write_bytes(data)
        self._ahead[sha] = self._pool.submit(dump_sass, copy)

    def start(self, artifact: Path) -> None:
        """Start both tools on `artifact` (once)."""
        if self._sass is not None:
            raise RuntimeError("a DeviceCodeReader reads one object")
        self._sass = self._pool.submit(self._dump_object, artifact)
        self._hash = self._pool.submit(device_code_sha256, artifact)

    def _dump_object(self, artifact: Path) -> str:
        blobs = plain_fatbins(artifact.read_bytes(), artifact.name)
        if blobs is None:
            return dump_sass(artifact)
        try:
            return "".join(self._dump_fatbin(blob, i) for i, blob in enumerate(blobs))
        except SassDumpError:  # the object's own dump decides (and names the object in its error)
            return dump_sass(artifact)

    def _dump_fatbin(self, blob: bytes, index: int) -> str:
        sha = _sha256(blob)
        text = self._memo.get(sha)
        if text is None:
            ahead = self._ahead.get(sha)
            if ahead is not None:
                text = ahead.result()
            else:
                path = self._tmp / f"object-{index}.fatbin"
                path.write_bytes(blob)
                text = dump_sass(path)
            self._memo.put(sha, text)
        return text

    def report(self, arch: Architecture) -> tuple[SassReport, str]:
        """(the static SASS report, the device-code sha256) of the started object; its tools' errors raise."""
        if self._sass is None or self._hash is None:
            raise RuntimeError("no object was started")
        return classify(parse_sass(self._sass.result()), arch), self._hash.result()

    def __enter__(self) -> DeviceCodeReader:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self._pool.shutdown(wait=True)  # a refused build's readers finish (at most a second); none outlives us
        shutil.rmtree(self._tmp, ignore_errors=True)
