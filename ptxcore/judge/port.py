"""The judge port: one interface shape for every backend."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from ptxcore.schema import Language

if TYPE_CHECKING:
    from ptxcore.arch import Architecture
    from ptxcore.compile import CompiledCandidate
    from ptxcore.problems import Problem
    from ptxcore.schema import JudgeResult


class JudgeBackend(Protocol):
    """Judges one candidate. A bad kernel is a returned verdict; an infrastructure failure raises (or
    returns INFRA_ERROR, which the caller turns into InfraFailure).

    `compiled` is the CPU stage's build of the same source when there was one: a backend on the same host
    reuses it (no second nvcc), a remote one rebuilds from `source`. `language` says what `source` is (CUDA
    `kernel.cu` or Triton `kernel.py`); every backend carries it to wherever the judgement happens. All three
    are keyword-only, so that no caller or backend depends on an order of them.
    """

    name: str
    """Shown in logs and in the campaign summary (e.g. `local-gpu`, `service:http://...`)."""

    def judge(self, source: str, problem: Problem, arch: Architecture, *, compiled: CompiledCandidate | None = None,
              workload_uuid: str | None = None, language: Language = Language.CUDA) -> JudgeResult: ...
