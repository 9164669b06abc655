from __future__ import annotations

import pytest

from ptxcore.compile import CompileCache


@pytest.fixture(scope="session")
def cache(compile_cache_dir) -> CompileCache:
    return CompileCache(compile_cache_dir)
