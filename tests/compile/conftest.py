from __future__ import annotations

import dataclasses
import os
import shutil
import tempfile
from pathlib import Path

import pytest

from ptxcore.compile import CompileCache
from ptxcore.compile import stage as stage_module
from ptxcore.compile.toolchain import IncludeRoot, toolchain

# A fake vendor installation (what a full CUDA toolkit has on a GPU host): headers whose content must never
# reach a result, plus an honest helper header in the same allowed root.
VENDOR_MARKER = "VENDOR_HEADER_CONTENT_7f3a"
VENDOR_HEADERS = {
    "cublas_v2.h": f"#pragma once\nint {VENDOR_MARKER}_cublas(void);\n",
    "cudnn.h": f"#pragma once\nint {VENDOR_MARKER}_cudnn(void);\n",
    "flashinfer/prefill.cuh": f"#pragma once\nint {VENDOR_MARKER}_flashinfer(void);\n",
    "helper.cuh": "#pragma once\n__device__ inline float twice(float x) { return 2.0f * x; }\n",
}


@pytest.fixture(scope="session")
def cache(compile_cache_dir) -> CompileCache:
    return CompileCache(compile_cache_dir / "compile")


def world_readable_dir(prefix: str) -> Path:
    """A directory the sandbox's user (nobody, when tests run as root) can read."""
    path = Path(tempfile.mkdtemp(prefix=prefix, dir="/tmp"))
    os.chmod(path, 0o755)
    return path


@pytest.fixture
def vendor_root(monkeypatch):
    """The compile stage's toolchain with one more allowed include root holding VENDOR_HEADERS."""
    root = world_readable_dir("ptxbench-vendor-")
    for name, text in VENDOR_HEADERS.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
        os.chmod((root / name).parent, 0o755)
    real = toolchain("hopper")
    fake = dataclasses.replace(real, pack_headers=(*real.pack_headers, str(root)),
                               include_roots=(*real.include_roots, IncludeRoot("pack:vendor", str(root))))
    monkeypatch.setattr(stage_module, "toolchain", lambda arch_key: fake)
    yield root
    shutil.rmtree(root, ignore_errors=True)
