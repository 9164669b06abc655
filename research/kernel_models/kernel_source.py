"""The solution library's kernels (where they are, which of them take the target path) and their compile-time
constants, read out of the .cu files so the CPU models use the kernel's own values."""

from __future__ import annotations

import re
from pathlib import Path

SOLUTIONS = Path(__file__).resolve().parents[2] / "solutions"

_CONSTEXPR = re.compile(r"^constexpr\s+(int|bool|float)\s+(\w+)\s*=\s*([^;]+);", re.MULTILINE)


def solution_path(problem: str, name: str) -> Path:
    return SOLUTIONS / problem / name


def library_kernels() -> list[Path]:
    """Every CUDA kernel of the library (solutions/<problem>/<name>.cu), sorted."""
    return sorted(SOLUTIONS.glob("*/*.cu"))


def kernel_id(path: Path) -> str:
    """`<problem>/<name>.cu`: a kernel's name in test ids and tables."""
    return f"{path.parent.name}/{path.name}"


def uses_target_path(path: Path) -> bool:
    """Naming rule of the library: wgmma kernels carry 'wgmma' in their file name."""
    return "wgmma" in path.name


def kernel_constants(path: Path) -> dict[str, int | bool | float]:
    """Evaluate the file's top-level `constexpr int|bool|float NAME = expr;` lines in order."""
    env: dict[str, int | bool | float] = {}
    for kind, name, expr in _CONSTEXPR.findall(path.read_text()):
        py = expr.replace("true", "True").replace("false", "False")
        if kind == "float":
            py = re.sub(r"(\d)f\b", r"\1", py)
        else:
            py = py.replace("/", "//")
        ternary = re.fullmatch(r"(.+?)\?(.+):(.+)", py)  # one `c ? a : b` (the head-dim padding rules)
        if ternary:
            py = f"({ternary.group(2)}) if ({ternary.group(1)}) else ({ternary.group(3)})"
        env[name] = eval(py, {"__builtins__": {}}, dict(env))  # noqa: S307 - arithmetic on our own constants
    return env
