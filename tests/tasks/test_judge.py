"""The judge task's body and retry rule (no Prefect server needed: the task bodies run directly)."""

from __future__ import annotations

from types import SimpleNamespace

import httpx
import pytest

from ptxcore.arch import Architecture, get_architecture
from ptxcore.compile import CompiledCandidate
from ptxcore.judge import InfraFailure
from ptxcore.problems import Problem, get_problem
from ptxcore.schema import (
    CompileResult,
    CompileStatus,
    EvaluationStatus,
    JudgeCorrectness,
    JudgeResult,
    Language,
    SassReport,
    StaticTarget,
    TargetInstruction,
    TargetInstructionEvidence,
)
from tasks.judge import judge_kernel, retry_on_infra
from tasks.states import value

PROBLEM = get_problem("gemm_n7168_k5120")
HOPPER = get_architecture("hopper")


def candidate(static: StaticTarget) -> CompiledCandidate:
    result = CompileResult(status=CompileStatus.COMPILED, source_sha256="a" * 64, arch="hopper", cubin_sha256="b" * 64)
    return CompiledCandidate(result, None, SassReport(arch="hopper", target_static=static, required_families=["gmma"]))


class Backend:
    name = "scripted"

    def __init__(self, status: EvaluationStatus) -> None:
        self.status = status

    def judge(self, source: str, problem: Problem, arch: Architecture, *, compiled: CompiledCandidate | None = None,
              workload_uuid: str | None = None, language: Language = Language.CUDA) -> JudgeResult:
        self.language = language
        wrong = self.status is EvaluationStatus.INCORRECT_NUMERICAL
        return JudgeResult(status=self.status, reason="why", definition=problem.name, arch=arch.key,
                           correctness=JudgeCorrectness(max_absolute_error=3.0) if wrong else None,
                           target_instruction=TargetInstructionEvidence(status=TargetInstruction.UNKNOWN))


def test_judge_task_body_raises_on_infra_error_only():
    c = candidate(StaticTarget.PRESENT)
    state = judge_kernel.fn(Backend(EvaluationStatus.INCORRECT_NUMERICAL), "src", c, PROBLEM.name, "hopper", label="x")
    assert value(state).status is EvaluationStatus.INCORRECT_NUMERICAL  # Completed, named by the verdict
    assert state.is_completed() and (state.name, state.message) == ("INCORRECT_NUMERICAL", "why")
    with pytest.raises(InfraFailure, match="why"):
        judge_kernel.fn(Backend(EvaluationStatus.INFRA_ERROR), "src", c, PROBLEM.name, "hopper", label="x")


def test_a_recorded_verdict_names_itself_in_the_state():
    """Prefect's judge task state read `PASSED` for a verdict nobody measured in this run."""
    from ptxcore.schema import RecordedVerdict

    rec = RecordedVerdict(source="campaigns/recorded/h200", trace_sha256="ef" * 32, gpu_name="NVIDIA H200",
                          driver_version="580.159.04", judged_at="2026-12-01T11:50:45+00:00")

    class Reused(Backend):
        def judge(self, *args, **kw):
            return super().judge(*args, **kw).model_copy(update={"recorded": rec})

    state = judge_kernel.fn(Reused(EvaluationStatus.INCORRECT_NUMERICAL), "src", candidate(StaticTarget.PRESENT),
                            PROBLEM.name, "hopper", label="x")
    assert state.name == "INCORRECT_NUMERICAL (recorded)"
    assert state.message == "recorded on NVIDIA H200, driver 580.159.04, 2026-12-01, not measured in this run: why"
    assert value(state).recorded == rec


def test_judge_task_carries_the_language_to_the_backend():
    backend = Backend(EvaluationStatus.INCORRECT_NUMERICAL)
    judge_kernel.fn(backend, "src", candidate(StaticTarget.PRESENT), PROBLEM.name, "hopper", label="x")
    assert backend.language is Language.CUDA
    judge_kernel.fn(backend, "src", candidate(StaticTarget.PRESENT), PROBLEM.name, "hopper", label="x",
                    language=Language.TRITON)
    assert backend.language is Language.TRITON


@pytest.mark.parametrize("exc,retry", [
    (InfraFailure(JudgeResult(status=EvaluationStatus.INFRA_ERROR, definition="d", arch="hopper",
                              target_instruction=TargetInstructionEvidence(status=TargetInstruction.UNKNOWN))), True),
    (httpx.ConnectError("refused"), True),
    (ConnectionResetError(), True),
    (TimeoutError(), True),
    (ValueError("a bug"), False),
    (KeyError("x"), False),
])
def test_retry_condition_accepts_only_infrastructure_failures(exc, retry):
    assert retry_on_infra(None, None, SimpleNamespace(data=exc)) is retry
