"""The CPU stage of a candidate in any judged language: one function, dispatching on the language.

    build_candidate(source, BuildOptions(arch), cache, language=Language.TRITON) -> CompiledCandidate

CUDA: the forbidden-source check and the cached nvcc build (`compile_candidate`). Triton: the static validator
(`ptxcore.triton.stage.triton_stage`); nothing is built on the CPU (Triton compiles at the first launch on the GPU
host), so the CompiledCandidate has no artifact and no SASS, and its result is the validator's: REJECTED with the
rule named, COMPILE_ERROR for a Python syntax error, else COMPILED. A language outside JUDGED_LANGUAGES raises
UnsupportedLanguage (callers give such turns NOT_EVALUATED before they get here).
"""

from __future__ import annotations

from ptxcore.schema import JUDGED_LANGUAGES, Language

from .cache import CompileCache
from .nvcc import BuildOptions
from .stage import CompiledCandidate, compile_candidate


class UnsupportedLanguage(ValueError):
    """No CPU stage exists for this language."""


def build_candidate(source: str, options: BuildOptions, cache: CompileCache | None = None,
                    language: Language | str = Language.CUDA) -> CompiledCandidate:
    """The CPU stage for `language`; a bad kernel is a verdict in the result, never an exception."""
    lang = Language(language)
    if lang not in JUDGED_LANGUAGES:
        raise UnsupportedLanguage(f"no compile stage for language {lang.value!r} "
                                  f"(judged: {', '.join(sorted(x.value for x in JUDGED_LANGUAGES))})")
    if lang is Language.TRITON:
        from ptxcore.triton.stage import triton_stage

        result, _check = triton_stage(source, options.arch.key)
        return CompiledCandidate(result, None, None)
    return compile_candidate(source, options, cache)
