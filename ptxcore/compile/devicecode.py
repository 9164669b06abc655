"""The static device-code facts of a built object, read while the build's gate runs.

`cuobjdump --dump-sass` of the shared object (the static SASS verdict) and `cuobjdump -xelf` (the device-code
hash) are external processes: they start as soon as a successful build's object is copied out of the sandbox
(`DeviceCodeReader.start`, the `on_object` of ptxcore.compile.build.sandboxed_build) and run beside the
include/directive gate and the import check, which are Python. Exactly the same tools on exactly the same file
as before; only the order changed. Their results are read only for a COMPILED build; a refused build's readers
are waited for and their output dropped. A tool failure raises (SassDumpError), as it did when run in line.
"""

from __future__ import annotations

import logging
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from types import TracebackType

from ptxcore.arch import Architecture
from ptxcore.sass import classify, dump_sass, parse_sass
from ptxcore.sass.verdict import device_code_sha256
from ptxcore.schema import SassReport

log = logging.getLogger(__name__)


class DeviceCodeReader:
    """Reads one object's SASS and device-code hash in two background threads (each waits on its tool)."""

    def __init__(self) -> None:
        self._pool = ThreadPoolExecutor(max_workers=2, thread_name_prefix="device-code")
        self._sass: Future[str] | None = None
        self._hash: Future[str] | None = None

    def start(self, artifact: Path) -> None:
        """Start both tools on `artifact` (once)."""
        if self._sass is not None:
            raise RuntimeError("a DeviceCodeReader reads one object")
        self._sass = self._pool.submit(dump_sass, artifact)
        self._hash = self._pool.submit(device_code_sha256, artifact)

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
