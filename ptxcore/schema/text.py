"""One-line texts drawn from longer ones (pure, no imports of ours)."""

from __future__ import annotations

TRACEBACK_HEADER = "Traceback (most recent call last):"
LINE_LIMIT_CHARS = 500
"""Longest line `exception_line` returns."""


def exception_line(text: str, limit: int = LINE_LIMIT_CHARS) -> str:
    """The line that says what went wrong: for a Python traceback the exception's own line (`RuntimeError: ...`,
    after the last frame of the last chained traceback), for any other text its first non-blank line."""
    lines = [ln.rstrip() for ln in (text or "").splitlines() if ln.strip()]
    if not lines:
        return ""
    headers = [i for i, ln in enumerate(lines) if TRACEBACK_HEADER in ln]
    if not headers:
        return lines[0][:limit]
    last_tb = headers[-1]
    frames = [i for i in range(last_tb, len(lines)) if lines[i].startswith((" ", "\t"))]
    after = (frames[-1] if frames else last_tb) + 1
    return (lines[after] if after < len(lines) else lines[last_tb])[:limit]
