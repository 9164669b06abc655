from __future__ import annotations

from pathlib import Path

import pytest

from ptxcore.compile import CompileCache

PACKS = Path(__file__).resolve().parents[2] / "knowledge_packs"
KERNELS = Path(__file__).resolve().parent / "kernels"


@pytest.fixture(scope="session")
def cache(compile_cache_dir) -> CompileCache:
    return CompileCache(compile_cache_dir / "compile")
