"""Content hash as identity: one definition used by every stage (kernels, sources, configs, records)."""

from __future__ import annotations

import hashlib


def text_sha256(text: str) -> str:
    """sha256 hex digest of the UTF-8 encoding of `text`."""
    return hashlib.sha256(text.encode()).hexdigest()
