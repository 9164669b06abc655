"""Compile stage (CPU workers): forbidden-source check, nvcc with a content-addressed cache, ptxas report."""

from .cache import CompileCache
from .forbidden import ForbiddenUse, find_forbidden, strip_comments
from .nvcc import BuildOptions, toolkit_version
from .ptxas import parse_ptxas
from .stage import CompiledCandidate, compile_candidate, source_sha256

__all__ = [
    "CompileCache", "ForbiddenUse", "find_forbidden", "strip_comments", "BuildOptions",
    "toolkit_version", "parse_ptxas", "CompiledCandidate", "compile_candidate", "source_sha256",
]
