"""Fast source checks before nvcc: size cap, forbidden library use, and include names that leave the allowed
headers. Every step is a linear-time regular-expression pass (no nested quantifiers over newlines).

This is the cheap first gate. The authoritative one reads what the preprocessor actually opened (includes.py),
so macros, `#include_next` and computed names are caught there whatever the spelling.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

MAX_SOURCE_BYTES = 1 << 20
"""Largest candidate source, bytes (the paper's kernels are 5-60 kB)."""

# Header names that pull in cuBLAS / cuBLASLt / cuDNN / FlashInfer / PyTorch library calls.
FORBIDDEN_HEADERS: tuple[tuple[str, str], ...] = (
    (r"cublasLt\w*\.h", "cuBLASLt"),
    (r"cublas(_v2|_api|Xt)?\.h", "cuBLAS"),
    (r"cudnn\w*\.h", "cuDNN"),
    (r"cudnn_frontend\w*\.h", "cuDNN frontend"),
    (r"flashinfer/[\w/.]+", "FlashInfer"),
    (r"ATen/[\w/.]+|torch/[\w/.]+", "PyTorch (ATen dispatches to cuBLAS/cuDNN)"),
)
# Code (strings and characters included, an unterminated one ends at its line) or one comment.
_CODE = r'(?:[^/"\']+|/(?![/*])|"[^"\\\n]*(?:\\.[^"\\\n]*)*"?|\'[^\'\\\n]*(?:\\.[^\'\\\n]*)*\'?)+'
_TOKENS = re.compile(_CODE + r"|//[^\n]*|/\*(?:[^*]*\*+(?:[^/*][^*]*\*+)*/|.*\Z)", re.S)
_SPLICE = re.compile(r"\\[ \t]*\n")
_INCLUDE = re.compile(r'^[ \t]*(?:#|%:)[ \t]*include(?:_next)?[ \t]*[<"]([^>"\n]*)[>"]', re.MULTILINE)
_EMBED = re.compile(r"^[ \t]*(?:#|%:)[ \t]*embed\b", re.MULTILINE)
_LINK_PRAGMA = re.compile(r'#[ \t]*pragma[ \t]+comment[ \t]*\([ \t]*lib[ \t]*,[ \t]*"([^"\n]+)"')
_DLOPEN_LIB = re.compile(r'"[^"\n]*lib(cublas|cublasLt|cudnn|flashinfer)[^"\n]*"')


@dataclass(frozen=True)
class ForbiddenUse:
    """Why a source is rejected."""

    library: str
    evidence: str

    def message(self) -> str:
        return f"forbidden library use: {self.library} ({self.evidence}); write the kernel yourself"


def normalize_lines(source: str) -> str:
    """Translation phases 1-2 as gcc does them: CRLF and lone CR end lines; backslash-newline joins lines."""
    return _SPLICE.sub("", source.replace("\r\n", "\n").replace("\r", "\n"))


def strip_comments(source: str) -> str:
    """Remove // and /* */ comments (each becomes its newlines), keeping string and character literals."""
    def keep(m: re.Match[str]) -> str:
        text = m.group(0)
        if text.startswith("//"):
            return ""
        return " " + "\n" * text.count("\n") if text.startswith("/*") else text

    return _TOKENS.sub(keep, source)


def library_of_header(name: str) -> str | None:
    """The forbidden library a header name belongs to (by its path relative to an include directory)."""
    name = name.strip()
    for pattern, library in FORBIDDEN_HEADERS:
        if re.fullmatch(pattern, name):
            return library
    return None


def escapes_headers(name: str) -> bool:
    """An include name that could leave the include directories: absolute, `..`, or `./`."""
    name = name.strip()
    return name.startswith("/") or name.startswith("./") or ".." in re.split(r"[/\\]", name)


def find_forbidden(source: str) -> ForbiddenUse | None:
    """First forbidden include, link pragma or library name string (comments ignored)."""
    return _forbidden_in(strip_comments(normalize_lines(source)))


def _forbidden_in(code: str) -> ForbiddenUse | None:
    for header in _INCLUDE.findall(code):
        library = library_of_header(header) or library_of_header(header.rsplit("/", 1)[-1])
        if library is not None:
            return ForbiddenUse(library, f"#include <{header.strip()}>")
    for lib in _LINK_PRAGMA.findall(code):
        if re.search(r"cublas|cudnn|flashinfer", lib, re.IGNORECASE):
            return ForbiddenUse(lib, f"link pragma {lib!r}")
    m = _DLOPEN_LIB.search(code)
    if m:
        return ForbiddenUse(f"lib{m.group(1)}", f"library name {m.group(0)} in source")
    return None


EMBED_DIRECTIVE_REASON = "#embed reads a file into the program; kernels may not embed files"
OUTSIDE_REASON = ("include outside the allowed headers (CUDA toolkit, tvm_ffi, knowledge-pack headers, the "
                  "host compiler's standard headers); use a plain header name such as <cuda.h>")


def source_rejection(source: str) -> str | None:
    """One-line reason to reject `source` before any build, or None. Quotes nothing but header names."""
    size = len(source.encode("utf-8", errors="surrogatepass"))
    if size > MAX_SOURCE_BYTES:
        return f"source is {size} bytes; the limit is {MAX_SOURCE_BYTES} bytes"
    code = strip_comments(normalize_lines(source))
    forbidden = _forbidden_in(code)
    if forbidden is not None:
        return forbidden.message()
    if _EMBED.search(code):  # gcc 15 reads it in the first pass and writes no line marker for the file
        return EMBED_DIRECTIVE_REASON
    if any(escapes_headers(header) for header in _INCLUDE.findall(code)):
        return OUTSIDE_REASON
    return None
