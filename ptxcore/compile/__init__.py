"""Compile stage (CPU workers): source checks, sandboxed nvcc with a verified content-addressed cache,
include and assembler-directive gate, ptxas report; `build_candidate` dispatches on the language (Triton:
the static validator of ptxcore.triton)."""

from .cache import CompileCache
from .forbidden import MAX_SOURCE_BYTES, ForbiddenUse, find_forbidden, strip_comments
from .language import UnsupportedLanguage, build_candidate
from .nvcc import BuildOptions, toolkit_version
from .ptxas import parse_ptxas
from .stage import CompiledCandidate, compile_candidate, source_sha256

__all__ = [
    "CompileCache", "ForbiddenUse", "find_forbidden", "strip_comments", "MAX_SOURCE_BYTES", "BuildOptions",
    "toolkit_version", "parse_ptxas", "CompiledCandidate", "compile_candidate", "source_sha256",
    "build_candidate", "UnsupportedLanguage",
]
