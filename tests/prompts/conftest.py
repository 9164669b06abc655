from __future__ import annotations

import shutil
from pathlib import Path

import pytest

PACKS = Path(__file__).resolve().parents[2] / "knowledge_packs"


class WordCounter:
    """A fake tokenizer: whitespace-separated words (fast, deterministic)."""

    name = "fake:words"

    def count(self, text: str) -> int:
        return len(text.split())


@pytest.fixture
def words() -> WordCounter:
    return WordCounter()


@pytest.fixture
def pack_copy(tmp_path) -> Path:
    """A writable copy of the knowledge packs (for malformed-data tests)."""
    root = tmp_path / "knowledge_packs"
    shutil.copytree(PACKS, root)
    return root
