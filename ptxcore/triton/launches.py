"""Child side: which compiled Triton kernels a call launched, through Triton's own runtime hooks.

    recorder = LaunchRecorder()
    recorder.install()                  # before the candidate's first call: sees every kernel binary load
    with recorder.recording() as calls:
        candidate.run(*args)            # every launch inside is recorded (name, cubin sha256, stream)
    report = recorder.report(calls)     # plain dicts for the judge's pipe

`kernel_load_end_hook` fires once per loaded binary with its cache files (`<name>.cubin` among them), so the
recorder maps each CUfunction handle to the cubin Triton compiled for it; `launch_enter_hook` fires on every
launch with the handle and the stream. Only the launch hook costs time per launch, so it is installed only
while `recording()` is open (the first, evidence-collecting calls), never around timed calls.

Standard library only at import time; `triton.knobs` is looked up when `install()` runs (the candidate has
imported triton by then). Everything the candidate could forge here (it shares the process) is cross-checked
by the judge: the cubin files are read and hashed from the cache directory outside the child, kernel names
against CUPTI's records, executed instructions by Nsight Compute.
"""

from __future__ import annotations

import hashlib
import importlib
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

MAX_LAUNCHES_RECORDED = 10_000


@dataclass(frozen=True)
class KernelBinary:
    """One loaded Triton kernel binary."""

    name: str
    """Kernel (function) name: the @triton.jit function's name."""
    cubin_sha256: str
    """sha256 of the cubin bytes Triton loaded."""
    cubin_path: str
    """Where Triton's cache keeps it (inside the candidate's private cache dir)."""
    cache_hash: str
    """Triton's compilation hash (the cache sub-directory)."""


@dataclass(frozen=True)
class Launch:
    """One kernel launch."""

    binary: KernelBinary | None
    """The binary launched (None when it was loaded before install())."""
    name: str
    """Kernel name as the launch hook saw it."""
    stream: int
    """CUDA stream handle the launch went to."""


@dataclass
class LaunchRecorder:
    """Maps loaded CUfunction handles to cubins and, while recording, collects launches."""

    binaries: dict[int, KernelBinary] = field(default_factory=dict)
    launches: list[Launch] = field(default_factory=list)
    _knobs: object | None = None
    _recording: bool = False
    overflow: int = 0

    def install(self) -> None:
        self._knobs = importlib.import_module("triton.knobs")
        self._knobs.runtime.kernel_load_end_hook.add(self._loaded)

    def remove(self) -> None:
        if self._knobs is not None:
            self._knobs.runtime.kernel_load_end_hook.remove(self._loaded)
            self._knobs.runtime.launch_enter_hook.remove(self._launched)

    @contextmanager
    def recording(self) -> Iterator[list[Launch]]:
        """Record the launches made inside the block; yields the list they are appended to."""
        if self._knobs is None:
            raise RuntimeError("LaunchRecorder.install() must run first")
        start = len(self.launches)
        calls: list[Launch] = []
        self._knobs.runtime.launch_enter_hook.add(self._launched)
        self._recording = True
        try:
            yield calls
        finally:
            self._recording = False
            self._knobs.runtime.launch_enter_hook.remove(self._launched)
            calls.extend(self.launches[start:])

    def _loaded(self, module, function, name, metadata_group, hash, *_rest) -> None:  # noqa: A002, ANN001
        cubin = next((Path(p) for f, p in dict(metadata_group).items() if str(f).endswith(".cubin")), None)
        if cubin is None or not cubin.is_file():
            return
        digest = hashlib.sha256(cubin.read_bytes()).hexdigest()
        self.binaries[int(function)] = KernelBinary(str(name), digest, str(cubin), str(hash))

    def _launched(self, metadata: object) -> None:  # Triton's LazyDict, read by attribute only
        if not self._recording:
            return
        if len(self.launches) >= MAX_LAUNCHES_RECORDED:
            self.overflow += 1
            return
        data = getattr(metadata, "data", None) or {}  # never .get(): that would run user launch_metadata code
        function = int(data.get("function") or 0)
        self.launches.append(Launch(self.binaries.get(function), str(data.get("name", "")),
                                    int(data.get("stream") or 0)))

    def report(self, launches: list[Launch], cache_dir: Path | None = None) -> list[dict]:
        """Plain dicts (pipe-friendly), cubin paths relative to `cache_dir` when given."""
        out = []
        for launch in launches:
            b = launch.binary
            path = b.cubin_path if b else ""
            if b and cache_dir is not None:
                try:
                    path = str(Path(b.cubin_path).relative_to(cache_dir))
                except ValueError:
                    path = b.cubin_path
            out.append({"name": launch.name, "stream": launch.stream, "cubin_sha256": b.cubin_sha256 if b else "",
                        "cubin": path, "cache_hash": b.cache_hash if b else ""})
        return out
