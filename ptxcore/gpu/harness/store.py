"""Judge state on disk, checked on read: every entry carries the sha256 of its payload.

An entry that is unreadable, malformed, or whose payload no longer matches its digest (a tampered or
half-written file) is a miss — logged, removed, recomputed by the caller — never an exception and never a
stale verdict. Writes are atomic (temporary file, then rename).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from pathlib import Path

log = logging.getLogger(__name__)

FORMAT = "ptxbench-cache-v2"


def _digest(payload: str) -> str:
    return hashlib.sha256(payload.encode()).hexdigest()


def read_verified(path: Path) -> dict | None:
    """The payload of a verified entry; None (the entry removed) when it does not verify."""
    try:
        raw = path.read_text()
    except FileNotFoundError:
        return None
    except OSError as exc:
        log.warning("cache entry %s unreadable (%s): treated as a miss", path, exc)
        return None
    try:
        doc = json.loads(raw)
        payload = doc["payload"]
        if doc.get("format") != FORMAT or not isinstance(payload, str) or doc.get("sha256") != _digest(payload):
            raise ValueError("digest mismatch")
        value = json.loads(payload)
        if not isinstance(value, dict):
            raise ValueError("not an object")
        return value
    except (ValueError, KeyError, TypeError) as exc:
        log.warning("cache entry %s does not verify (%s): removed, will be recomputed", path, exc)
        path.unlink(missing_ok=True)
        return None


def write_verified(path: Path, value: dict) -> None:
    payload = json.dumps(value, sort_keys=True)
    tmp = path.with_suffix(f".tmp{os.getpid()}")
    tmp.write_text(json.dumps({"format": FORMAT, "sha256": _digest(payload), "payload": payload}))
    tmp.replace(path)
