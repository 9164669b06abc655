"""L2 flush between calls: overwrite a CuPy buffer twice the size of the L2 cache (not timed)."""

from __future__ import annotations

MIN_FLUSH_BYTES = 256 * 1024 * 1024


class L2Flusher:
    def __init__(self, device: int = 0) -> None:
        import cupy

        self._cp = cupy
        l2 = int(cupy.cuda.runtime.getDeviceProperties(device).get("l2CacheSize", 0))
        self.nbytes = max(2 * l2, MIN_FLUSH_BYTES)
        self._mem = cupy.cuda.Memory(self.nbytes)
        self._value = 0

    def flush(self) -> None:
        """Queue the overwrite on the NULL stream (a changing value, so no write can be elided)."""
        self._value = (self._value + 1) & 0xFF
        self._cp.cuda.runtime.memsetAsync(self._mem.ptr, self._value, self.nbytes, 0)
