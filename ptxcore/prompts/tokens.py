"""Token counting behind a small interface. Default: tiktoken's o200k_base, loaded offline.

tiktoken downloads its BPE files on first use. This machine has no general network, so we load the
copy that litellm (a base dependency) ships inside its package (`litellm_core_utils/tokenizers/`),
by pointing tiktoken's cache directory there; tiktoken checks the file's sha256 before using it. litellm
itself is never imported here. Qwen's (or any model's) own tokenizer gives different counts.
"""

from __future__ import annotations

import contextlib
import importlib.util
import logging
import os
from collections.abc import Iterator
from functools import lru_cache
from pathlib import Path
from typing import Protocol

log = logging.getLogger(__name__)

DEFAULT_ENCODING = "o200k_base"


class TokenizerUnavailableError(RuntimeError):
    """No offline copy of the requested encoding."""


class TokenCounter(Protocol):
    """Counts tokens of a text; `name` is recorded next to every count."""

    name: str

    def count(self, text: str) -> int: ...


def bundled_tiktoken_cache() -> Path | None:
    """Directory of the tiktoken cache files bundled with the installed litellm, if any."""
    spec = importlib.util.find_spec("litellm")
    if spec is None or spec.origin is None:
        return None
    path = Path(spec.origin).parent / "litellm_core_utils" / "tokenizers"
    return path if path.is_dir() else None


@contextlib.contextmanager
def _cache_dir(path: Path | None) -> Iterator[None]:
    """Point tiktoken at `path` for the duration, unless the user set a cache directory."""
    if path is None or "TIKTOKEN_CACHE_DIR" in os.environ:
        yield
        return
    os.environ["TIKTOKEN_CACHE_DIR"] = str(path)
    try:
        yield
    finally:
        os.environ.pop("TIKTOKEN_CACHE_DIR", None)


class TiktokenCounter:
    """tiktoken encoding, special tokens counted as plain text."""

    def __init__(self, encoding: str = DEFAULT_ENCODING) -> None:
        import tiktoken

        try:
            with _cache_dir(bundled_tiktoken_cache()):
                self._enc = tiktoken.get_encoding(encoding)
        except Exception as exc:  # network error, hash mismatch, unknown name
            raise TokenizerUnavailableError(
                f"tiktoken encoding {encoding!r} is not available offline ({type(exc).__name__}: {exc})"
            ) from exc
        self.name = f"tiktoken:{encoding}"

    def count(self, text: str) -> int:
        return len(self._enc.encode(text, disallowed_special=()))


@lru_cache(maxsize=4)
def default_counter(encoding: str = DEFAULT_ENCODING) -> TiktokenCounter:
    """The shared counter (loading the BPE takes about a second)."""
    log.info("loading tokenizer %s", encoding)
    return TiktokenCounter(encoding)
