"""Read compile-time constants out of a solution's .cu file, so the CPU models use the kernel's values."""

from __future__ import annotations

import re
from pathlib import Path

SOLUTIONS = Path(__file__).resolve().parents[2] / "solutions"

_CONSTEXPR = re.compile(r"^constexpr\s+(int|bool|float)\s+(\w+)\s*=\s*([^;]+);", re.MULTILINE)


def solution_path(problem: str, name: str) -> Path:
    return SOLUTIONS / problem / name


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
