"""Forbidden-source check: a candidate may not use the libraries it is compared against."""

from __future__ import annotations

import re
from dataclasses import dataclass

# Header stems that pull in cuBLAS / cuBLASLt / cuDNN / FlashInfer / CUTLASS-backed library calls.
FORBIDDEN_HEADERS: tuple[tuple[str, str], ...] = (
    (r"cublasLt\w*\.h", "cuBLASLt"),
    (r"cublas(_v2|_api|Xt)?\.h", "cuBLAS"),
    (r"cudnn\w*\.h", "cuDNN"),
    (r"cudnn_frontend\w*\.h", "cuDNN frontend"),
    (r"flashinfer/[\w/.]+", "FlashInfer"),
    (r"ATen/[\w/.]+|torch/[\w/.]+", "PyTorch (ATen dispatches to cuBLAS/cuDNN)"),
)
_INCLUDE = re.compile(r'^\s*#\s*include\s*[<"]([^>"]+)[>"]', re.MULTILINE)
_LINK_PRAGMA = re.compile(r'#\s*pragma\s+comment\s*\(\s*lib\s*,\s*"([^"]+)"', re.MULTILINE)
_DLOPEN_LIB = re.compile(r'"[^"\n]*lib(cublas|cublasLt|cudnn|flashinfer)[^"\n]*"')


@dataclass(frozen=True)
class ForbiddenUse:
    """Why a source is rejected."""

    library: str
    evidence: str

    def message(self) -> str:
        return f"forbidden library use: {self.library} ({self.evidence}); write the kernel yourself"


def strip_comments(source: str) -> str:
    """Remove // and /* */ comments, keeping string and character literals intact."""
    out: list[str] = []
    i, n = 0, len(source)
    while i < n:
        c = source[i]
        nxt = source[i + 1] if i + 1 < n else ""
        if c == "/" and nxt == "/":
            j = source.find("\n", i)
            i = n if j < 0 else j
        elif c == "/" and nxt == "*":
            j = source.find("*/", i + 2)
            segment = source[i : (n if j < 0 else j + 2)]
            out.append("\n" * segment.count("\n"))
            i = n if j < 0 else j + 2
        elif c in "\"'":
            j = i + 1
            while j < n and source[j] != c and source[j] != "\n":
                j += 2 if source[j] == "\\" else 1
            out.append(source[i : j + 1])
            i = j + 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def find_forbidden(source: str) -> ForbiddenUse | None:
    """First forbidden include, link pragma or library name string (comments ignored)."""
    code = strip_comments(source)
    for header in _INCLUDE.findall(code):
        for pattern, library in FORBIDDEN_HEADERS:
            if re.fullmatch(pattern, header.strip()):
                return ForbiddenUse(library, f"#include <{header}>")
    for lib in _LINK_PRAGMA.findall(code):
        if re.search(r"cublas|cudnn|flashinfer", lib, re.IGNORECASE):
            return ForbiddenUse(lib, f"link pragma {lib!r}")
    m = _DLOPEN_LIB.search(code)
    if m:
        return ForbiddenUse(f"lib{m.group(1)}", f"library name {m.group(0)} in source")
    return None
