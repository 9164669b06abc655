"""Judge backends and the judge task's retry rule (no Prefect server needed: the task bodies run directly)."""

from __future__ import annotations

from types import SimpleNamespace

import httpx
import pytest

from ptxcore.arch import get_architecture
from ptxcore.compile import CompiledCandidate
from ptxcore.problems import get_problem
from ptxcore.schema import (
    CompileResult,
    CompileStatus,
    EvaluationStatus,
    JudgeResult,
    SassReport,
    StaticTarget,
    TargetInstruction,
    TargetInstructionEvidence,
)
from tasks import judge as judge_mod
from tasks.judge import InfraFailure, NoGpuJudge, ServiceJudge, judge_kernel, retry_on_infra, select_judge
from tasks.states import value

PROBLEM = get_problem("gemm_n7168_k5120")
HOPPER = get_architecture("hopper")


def candidate(static: StaticTarget) -> CompiledCandidate:
    result = CompileResult(status=CompileStatus.COMPILED, source_sha256="a" * 64, arch="hopper", cubin_sha256="b" * 64)
    return CompiledCandidate(result, None, SassReport(arch="hopper", target_static=static, required_families=["gmma"]))


def test_no_gpu_judge_records_not_evaluated_with_only_static_facts():
    j = NoGpuJudge("no hopper GPU on this machine and no profiler URL")
    r = j.judge("src", PROBLEM, HOPPER, candidate(StaticTarget.ABSENT))
    assert r.status is EvaluationStatus.NOT_EVALUATED and r.correctness is None and r.performance is None
    assert r.target_instruction.status is TargetInstruction.ABSENT and r.target_instruction.static is StaticTarget.ABSENT
    assert r.reason.startswith("no hopper GPU") and r.target_instruction.cubin_sha256 == "b" * 64
    present = j.judge("src", PROBLEM, HOPPER, candidate(StaticTarget.PRESENT))
    assert present.target_instruction.status is TargetInstruction.UNKNOWN


def test_selection_plugin_then_profiler_then_local_gpu_then_none(monkeypatch):
    assert select_judge("hopper", plugin="tests.flows.fakes:fake_judge").name == "fake"
    assert isinstance(select_judge("hopper", profiler_url="http://gpu:8000"), ServiceJudge)
    monkeypatch.setattr(judge_mod, "local_gpu_archs", lambda: {"hopper"})
    assert select_judge("hopper").name == "local-gpu"
    assert select_judge("blackwell").name == "none"
    monkeypatch.setattr(judge_mod, "local_gpu_archs", lambda: set())
    assert "no hopper GPU" in select_judge("hopper").reason
    with pytest.raises(ValueError, match="module:factory"):
        select_judge("hopper", plugin="nocolon")


def test_local_gpu_archs_reads_compute_capability(monkeypatch):
    monkeypatch.setattr(judge_mod.shutil, "which", lambda name: "/usr/bin/nvidia-smi")
    monkeypatch.setattr(judge_mod.subprocess, "run",
                        lambda *a, **k: SimpleNamespace(returncode=0, stdout="9.0\n9.0\n10.0\n8.0\n"))
    assert judge_mod.local_gpu_archs() == {"hopper", "blackwell"}


class Backend:
    name = "scripted"

    def __init__(self, status: EvaluationStatus) -> None:
        self.status = status

    def judge(self, source, problem, arch, compiled):
        return JudgeResult(status=self.status, reason="why", definition=problem.name, arch=arch.key,
                           target_instruction=TargetInstructionEvidence(status=TargetInstruction.UNKNOWN))


def test_judge_task_body_raises_on_infra_error_only():
    c = candidate(StaticTarget.PRESENT)
    state = judge_kernel.fn(Backend(EvaluationStatus.INCORRECT_NUMERICAL), "src", c, PROBLEM.name, "hopper", label="x")
    assert value(state).status is EvaluationStatus.INCORRECT_NUMERICAL  # Completed, named by the verdict
    assert state.is_completed() and (state.name, state.message) == ("INCORRECT_NUMERICAL", "why")
    with pytest.raises(InfraFailure, match="why"):
        judge_kernel.fn(Backend(EvaluationStatus.INFRA_ERROR), "src", c, PROBLEM.name, "hopper", label="x")


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


def test_service_judge_submits_and_returns_the_service_verdict():
    verdict = JudgeResult(status=EvaluationStatus.INCORRECT_SHAPE, definition=PROBLEM.name, arch="hopper",
                          target_instruction=TargetInstructionEvidence(status=TargetInstruction.NOT_EXECUTED))
    seen = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append((request.method, request.url.path, request.headers.get("authorization")))
        if request.url.path == "/evaluate":
            return httpx.Response(200, json={"task_id": "t1"})
        return httpx.Response(200, json={"task_id": "t1", "state": "completed",
                                         "result": verdict.model_dump(mode="json")})

    j = ServiceJudge("http://gpu-host:8765", token="s3cret-token", transport=httpx.MockTransport(handler))
    r = j.judge("src", PROBLEM, HOPPER, candidate(StaticTarget.PRESENT))
    assert r == verdict and seen[0] == ("POST", "/evaluate", "Bearer s3cret-token") and seen[1][1] == "/tasks/t1"


def test_service_outage_raises_an_error_the_judge_task_retries():
    j = ServiceJudge("http://gpu-host:8765", transport=httpx.MockTransport(lambda r: httpx.Response(503, text="busy")))
    with pytest.raises(Exception) as info:
        j.judge("src", PROBLEM, HOPPER, candidate(StaticTarget.PRESENT))
    assert type(info.value).__name__ == "ProfilerUnavailable"
    assert retry_on_infra(None, None, SimpleNamespace(data=info.value)) is True
