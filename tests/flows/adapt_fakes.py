"""A judge plugin for adapt flow tests (`tests.flows.adapt_fakes:adapt_judge`): a kernel holding the marker
ADAPT_TEST_CORRECT passes with its target instructions executed (speedup 0.5); any other compiled kernel
is INCORRECT_NUMERICAL, as tests.flows.fakes does. No GPU is touched."""

from __future__ import annotations

from ptxcore.arch import Architecture
from ptxcore.compile import CompiledCandidate
from ptxcore.problems import Problem
from ptxcore.schema import JudgeResult, Language

from .fakes import FakeJudge

MARKER = "ADAPT_TEST_CORRECT"


class AdaptJudge(FakeJudge):
    name = "adapt-fake"

    def judge(self, source: str, problem: Problem, arch: Architecture, *, compiled: CompiledCandidate | None = None,
              workload_uuid: str | None = None, language: Language = Language.CUDA) -> JudgeResult:
        import os

        old = os.environ.pop("FAKE_JUDGE_SPEEDUP", None)
        try:
            if MARKER in source:
                os.environ["FAKE_JUDGE_SPEEDUP"] = "0.5"
            return super().judge(source, problem, arch, compiled=compiled, language=language)
        finally:
            os.environ.pop("FAKE_JUDGE_SPEEDUP", None)
            if old is not None:
                os.environ["FAKE_JUDGE_SPEEDUP"] = old


def adapt_judge(arch: str) -> AdaptJudge:
    return AdaptJudge(arch)
