"""Locate NVIDIA binary tools: the CUDA toolkit's, or the PyPI wheels' (nvidia-cuda-cuobjdump/-nvdisasm)."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path


class ToolNotFoundError(RuntimeError):
    """A required NVIDIA tool is not installed."""


def _wheel_bin_dirs() -> list[Path]:
    dirs: list[Path] = []
    for entry in sys.path:
        base = Path(entry) / "nvidia"
        if base.is_dir():
            dirs.extend(sorted(p for p in base.glob("*/bin") if p.is_dir()))
    return dirs


def find_tool(name: str) -> str:
    """Path of `name`: $PTXBENCH_<NAME>, PATH, $CUDA_HOME/bin, then NVIDIA wheels on sys.path."""
    env = os.environ.get(f"PTXBENCH_{name.upper()}")
    if env:
        if Path(env).is_file() and os.access(env, os.X_OK):
            return env
        raise ToolNotFoundError(f"{name} not found at PTXBENCH_{name.upper()}={env}")
    found = shutil.which(name)
    if found:
        return found
    cuda_home = os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH") or "/usr/local/cuda"
    candidate = Path(cuda_home) / "bin" / name
    if candidate.is_file():
        return str(candidate)
    for d in _wheel_bin_dirs():
        candidate = d / name
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    raise ToolNotFoundError(
        f"{name} not found (install the CUDA toolkit or `pip install nvidia-cuda-{name}`)"
    )
