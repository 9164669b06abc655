"""Small JSON caches on disk (reference latencies, memcheck outcomes), written atomically."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path


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
        p = self.root / f"{key}.json"
        try:
            return json.loads(p.read_text())
        except (OSError, ValueError):
            return None

    def put(self, key: str, value: dict) -> None:
        p = self.root / f"{key}.json"
        tmp = p.with_suffix(f".tmp{os.getpid()}")
        tmp.write_text(json.dumps(value, indent=1, sort_keys=True))
        tmp.replace(p)
