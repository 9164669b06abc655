"""Fakes for flow tests: a judge plugin loaded by import path (`tests.flows.fakes:fake_judge`).

The fake judge never touches a GPU. Its verdicts are set by environment variables so that a campaign
run in a subprocess (the SIGKILL test) behaves the same:
  FAKE_JUDGE_SPEEDUP   when set, compiled kernels PASS with this speedup; else INCORRECT_NUMERICAL
  FAKE_JUDGE_DELAY_S   seconds each judgement takes (default 0)
  FAKE_JUDGE_INFRA_FILE  path: while this file exists, a judgement returns INFRA_ERROR and deletes it
A judgement asked for a language other than cuda names it in its reason (`judged as triton`).
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from ptxcore.arch import Architecture
from ptxcore.compile import CompiledCandidate
from ptxcore.problems import Problem
from ptxcore.schema import (
    EnvironmentInfo,
    EvaluationStatus,
    JudgeCorrectness,
    JudgeResult,
    Language,
    Performance,
    RecordedVerdict,
    TargetInstruction,
    TargetInstructionEvidence,
    TargetWork,
    TargetWorkShare,
)

FAKE_GPU = "Fake GPU (tests)"


CARRIED = TargetWorkShare(problem_flops=100, problem_min_bytes=100, target_flops=100, target_flops_bound=100,
                          flops_share=1.0, threshold=0.5, carries=TargetWork.CARRIES, reason="fake: all of the work")
"""The work share of a fake passing kernel: its target path carried the work (issue 25)."""


class FakeJudge:
    name = "fake"

    def __init__(self, arch: str) -> None:
        self.arch = arch
        self.calls = 0
        self.languages: list[Language] = []

    def judge(self, source: str, problem: Problem, arch: Architecture, *, compiled: CompiledCandidate | None = None,
              workload_uuid: str | None = None, language: Language = Language.CUDA) -> JudgeResult:
        self.calls += 1
        self.languages.append(Language(language))
        time.sleep(float(os.environ.get("FAKE_JUDGE_DELAY_S", "0")))
        env = EnvironmentInfo(gpu_name=FAKE_GPU, driver_version="0.0")
        evidence = TargetInstructionEvidence(status=TargetInstruction.NOT_EXECUTED, tool="fake")
        infra = os.environ.get("FAKE_JUDGE_INFRA_FILE")
        if infra and Path(infra).exists():
            Path(infra).unlink()
            return JudgeResult(status=EvaluationStatus.INFRA_ERROR, reason="fake driver hiccup", definition=problem.name,
                               arch=arch.key, target_instruction=evidence, environment=env)
        speedup = os.environ.get("FAKE_JUDGE_SPEEDUP")
        if speedup:
            s = float(speedup)
            return JudgeResult(
                status=EvaluationStatus.PASSED, definition=problem.name, arch=arch.key, environment=env,
                target_instruction=TargetInstructionEvidence(status=TargetInstruction.EXECUTED, tool="fake",
                                                             work=CARRIED),
                correctness=JudgeCorrectness(max_absolute_error=0.001, max_relative_error=0.002),
                performance=Performance(latency_ms=1.0 / s, reference_latency_ms=1.0, speedup_factor=s),
                compile=compiled.result if compiled else None, sass=compiled.sass if compiled else None,
            )
        return JudgeResult(
            status=EvaluationStatus.INCORRECT_NUMERICAL, reason="mismatch in 100% of elements" + (
                "" if Language(language) is Language.CUDA else f" (judged as {Language(language).value})"),
            definition=problem.name, arch=arch.key, environment=env, target_instruction=evidence,
            correctness=JudgeCorrectness(max_absolute_error=3.5, max_relative_error=1.0),
            compile=compiled.result if compiled else None, sass=compiled.sass if compiled else None,
        )


def fake_judge(arch: str) -> FakeJudge:
    return FakeJudge(arch)


H200_RECORDING = RecordedVerdict(source="campaigns/recorded/h200", trace_sha256="ef" * 32, gpu_name="NVIDIA H200",
                                 driver_version="580.159.04", judged_at="2026-12-01T11:50:45+00:00")
"""Where the demo's reused verdicts come from (label "NVIDIA H200, driver 580.159.04, 2026-12-01")."""


def reused_pass(problem: str, recorded: RecordedVerdict | None = H200_RECORDING, speedup: float = 0.9056) -> JudgeResult:
    """A PASSED envelope (target executed), reused from a recording unless `recorded` is None."""
    return JudgeResult(status=EvaluationStatus.PASSED, definition=problem, arch="hopper",
                       correctness=JudgeCorrectness(), recorded=recorded,
                       performance=Performance(latency_ms=0.75 / speedup, reference_latency_ms=0.75,
                                               speedup_factor=speedup),
                       target_instruction=TargetInstructionEvidence(status=TargetInstruction.EXECUTED))
