"""Small JSON caches of judge state on disk (reference latencies, memcheck outcomes, ncu evidence).

Written atomically; every entry carries the sha256 of its payload and is checked on read: an entry that is
unreadable, malformed, or whose payload no longer matches its digest (a tampered or half-written file) is
a miss — logged, removed, recomputed by the caller — never an exception and never a stale verdict.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from ptxcore.gpu.harness.store import read_verified, write_verified


def cache_key(*parts: str) -> str:
    h = hashlib.sha256()
    for p in parts:
        h.update(p.encode())
        h.update(b"\x1f")
    return h.hexdigest()


class JsonCache:
    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)

    def get(self, key: str) -> dict | None:
        return read_verified(self.root / f"{key}.json")

    def put(self, key: str, value: dict) -> None:
        write_verified(self.root / f"{key}.json", value)
