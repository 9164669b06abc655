"""The compile task: the CPU stage of a candidate on a CPU worker (CUDA: nvcc + ptxas report + static SASS
verdict, content-addressed cache; Triton: the static validator)."""

from __future__ import annotations

from prefect import task
from prefect.cache_policies import NO_CACHE

from ptxcore.arch import get_architecture
from ptxcore.compile import BuildOptions, CompiledCandidate, build_candidate
from ptxcore.schema import Language

from .states import outcome

COMPILE_TAG = "compile"
"""Tag whose concurrency limit bounds parallel nvcc builds."""


@task(name="compile", task_run_name="compile {label}", tags=[COMPILE_TAG], cache_policy=NO_CACHE)
def compile_kernel(source: str, arch: str, label: str, language: Language = Language.CUDA) -> CompiledCandidate:
    """The CPU stage for the architecture (no -lcuda: CPU workers have no driver); the task run's state
    is named by the build status (COMPILED, COMPILE_ERROR, REJECTED)."""
    compiled = build_candidate(source, BuildOptions(arch=get_architecture(arch)), language=language)
    r = compiled.result
    static = f"; target instructions in SASS: {compiled.sass.target_static.value}" if compiled.sass else ""
    return outcome(r.status.value, (r.reason or r.status.value) + static, compiled)  # type: ignore[return-value]
