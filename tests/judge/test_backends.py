"""Judge backends and their selection from a route."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest

from ptxcore.arch import get_architecture
from ptxcore.compile import CompiledCandidate
from ptxcore.gpu import probe
from ptxcore.judge import (
    JudgeRoute,
    LocalGpuJudge,
    NoGpuJudge,
    RouteError,
    RouteKind,
    ServiceJudge,
    cpu_stages,
    resolve_routes,
    select_judge,
)
from ptxcore.judge.errors import is_infrastructure_failure
from ptxcore.problems import get_problem
from ptxcore.schema import (
    CompileResult,
    CompileStatus,
    EvaluationStatus,
    JudgeResult,
    Language,
    SassReport,
    StaticTarget,
    TargetInstruction,
    TargetInstructionEvidence,
    TargetWork,
    text_sha256,
)

PROBLEM = get_problem("gemm_n7168_k5120")
HOPPER = get_architecture("hopper")


def candidate(static: StaticTarget) -> CompiledCandidate:
    result = CompileResult(status=CompileStatus.COMPILED, source_sha256="a" * 64, arch="hopper", cubin_sha256="b" * 64)
    return CompiledCandidate(result, None, SassReport(arch="hopper", target_static=static, required_families=["gmma"]))


def test_no_gpu_judge_records_not_evaluated_with_only_static_facts():
    j = NoGpuJudge("no hopper GPU on this machine and no profiler URL")
    r = j.judge("src", PROBLEM, HOPPER, compiled=candidate(StaticTarget.ABSENT))
    assert r.status is EvaluationStatus.NOT_EVALUATED and r.correctness is None and r.performance is None
    assert r.target_instruction.status is TargetInstruction.ABSENT and r.target_instruction.static is StaticTarget.ABSENT
    assert r.reason.startswith("no hopper GPU") and r.target_instruction.cubin_sha256 == "b" * 64
    present = j.judge("src", PROBLEM, HOPPER, compiled=candidate(StaticTarget.PRESENT))
    assert present.target_instruction.status is TargetInstruction.UNKNOWN


def test_selection_plugin_then_profiler_then_local_gpu_then_none(monkeypatch):
    route = {a: r for a, r in resolve_routes(["hopper"], plugin="tests.flows.fakes:fake_judge").items()}
    assert select_judge(route["hopper"], "hopper").name == "fake"
    assert isinstance(select_judge(JudgeRoute.parse("http://gpu:8000"), "hopper"), ServiceJudge)
    monkeypatch.setattr(probe, "visible_gpus", lambda: (probe.GpuInfo(0, "H200", (9, 0)),))
    assert select_judge(JudgeRoute(RouteKind.AUTO), "hopper").name == "local-gpu"
    assert select_judge(JudgeRoute(RouteKind.AUTO), "blackwell").name == "none"
    with pytest.raises(RouteError, match="no blackwell GPU"):
        select_judge(JudgeRoute(RouteKind.LOCAL), "blackwell")
    monkeypatch.setattr(probe, "visible_gpus", lambda: ())
    assert "no hopper GPU" in select_judge(JudgeRoute(RouteKind.AUTO), "hopper").reason
    with pytest.raises(RouteError, match="module:factory"):
        resolve_routes(["hopper"], plugin="nocolon")


def test_gpu_architectures_from_compute_capability(monkeypatch):
    gpus = tuple(probe.GpuInfo(i, "g", cc) for i, cc in enumerate([(9, 0), (9, 0), (10, 0), (8, 0)]))
    monkeypatch.setattr(probe, "_devices", lambda: gpus)
    assert probe.gpu_architectures() == {"hopper", "blackwell"}
    monkeypatch.setenv("PTXBENCH_FORCE_NO_GPU", "1")
    assert probe.gpu_architectures() == set() and not probe.gpu_available()


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
    r = j.judge("src", PROBLEM, HOPPER, compiled=candidate(StaticTarget.PRESENT))
    assert r == verdict and seen[0] == ("POST", "/evaluate", "Bearer s3cret-token") and seen[1][1] == "/tasks/t1"


def test_service_outage_raises_an_error_the_judge_task_retries():
    j = ServiceJudge("http://gpu-host:8765", transport=httpx.MockTransport(lambda r: httpx.Response(503, text="busy")))
    with pytest.raises(Exception) as info:
        j.judge("src", PROBLEM, HOPPER, compiled=candidate(StaticTarget.PRESENT))
    assert type(info.value).__name__ == "ProfilerUnavailable"
    assert is_infrastructure_failure(info.value)


TRITON_SOLUTION = (Path(__file__).resolve().parents[2] / "solutions" / "triton" / "gemm_n7168_k5120"
                   / "tma_persistent.py").read_text()
TRITON_FALLBACK = (Path(__file__).resolve().parents[1] / "fixtures" / "controls" / "triton"
                   / "03_torch_fallback_alias.py").read_text()


def test_no_gpu_judge_validates_a_triton_kernel_then_says_not_evaluated(tmp_path):
    from ptxcore.gpu import JudgeConfig

    j = NoGpuJudge(config=JudgeConfig(cache_dir=tmp_path))
    r = j.judge(TRITON_SOLUTION, PROBLEM, HOPPER, language=Language.TRITON)
    assert r.status is EvaluationStatus.NOT_EVALUATED and r.correctness is None and r.performance is None
    assert r.compile.status is CompileStatus.COMPILED and r.compile.flags == ["triton"] and r.sass is None
    assert r.target_instruction.status is TargetInstruction.UNKNOWN
    bad = cpu_stages(TRITON_FALLBACK, PROBLEM, HOPPER, JudgeConfig(cache_dir=tmp_path), language=Language.TRITON)
    assert bad.status is EvaluationStatus.REJECTED and "module-as-value" in bad.reason
    assert not (tmp_path / "compile").exists() or not any((tmp_path / "compile").iterdir())  # no nvcc ran


def test_the_local_backend_hands_the_language_to_the_gpu_judge(monkeypatch):
    import ptxcore.gpu as gpu

    seen = {}

    def fake_judge_candidate(source, problem, arch, config=None, workload_uuid=None, compiled=None, language="cuda"):
        seen["language"] = language
        return JudgeResult(status=EvaluationStatus.INCORRECT_SHAPE, definition=problem.name, arch=arch.key,
                           target_instruction=TargetInstructionEvidence(status=TargetInstruction.UNKNOWN))

    monkeypatch.setattr(gpu, "judge_candidate", fake_judge_candidate)
    LocalGpuJudge().judge("src", PROBLEM, HOPPER, language=Language.TRITON)
    assert seen["language"] is Language.TRITON
    LocalGpuJudge().judge("src", PROBLEM, HOPPER)
    assert seen["language"] is Language.CUDA


def test_the_service_backend_sends_the_language_only_when_not_cuda():
    verdict = JudgeResult(status=EvaluationStatus.INCORRECT_SHAPE, definition=PROBLEM.name, arch="hopper",
                          target_instruction=TargetInstructionEvidence(status=TargetInstruction.NOT_EXECUTED))
    bodies = []

    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/evaluate":
            bodies.append(json.loads(request.content))
            return httpx.Response(200, json={"task_id": "t1"})
        return httpx.Response(200, json={"task_id": "t1", "state": "completed",
                                         "result": verdict.model_dump(mode="json")})

    j = ServiceJudge("http://gpu-host:8765", transport=httpx.MockTransport(handler))
    j.judge(TRITON_SOLUTION, PROBLEM, HOPPER, language=Language.TRITON)
    j.judge("src", PROBLEM, HOPPER)
    assert bodies[0]["language"] == "triton" and bodies[0]["source"] == TRITON_SOLUTION
    assert "language" not in bodies[1]  # a CUDA request is what it was before the field existed


RECORDED = Path(__file__).resolve().parents[2] / "campaigns" / "recorded" / "h200"


def _recorded_source(status: str, executed: bool | None = None) -> str:
    """The kernel of the demo's GEMM turn whose H200 verdict was `status` (its source from the recorded folder);
    `executed` picks, among several, the one whose target did (or did not) execute."""
    from ptxcore.problems.traceset import read_traced_verdicts
    from ptxcore.schema import Solution

    hit, *_ = [v for v in read_traced_verdicts(RECORDED)
               if v.trace.definition == PROBLEM.name and v.trace.evaluation.status.value == status
               and (executed is None or (v.target_instruction.status is TargetInstruction.EXECUTED) == executed)]
    for path in (RECORDED / "solutions").rglob(f"{hit.trace.solution}.json"):
        source = Solution.model_validate_json(path.read_text()).sources[0].content
        assert text_sha256(source) == hit.kernel_sha256
        return source
    raise AssertionError(f"no solution {hit.trace.solution}")


def test_a_recorded_runtime_error_gives_the_exception_as_its_reason():
    """The recorded trace keeps the log, whose first line is "Traceback (most recent call last):"; the reason (in
    evaluations.reason, the judge task's state message and the model's feedback) is the exception's own line."""
    from ptxcore.judge.backends.recorded import RecordedJudge

    source = _recorded_source("RUNTIME_ERROR")
    built = candidate(StaticTarget.PRESENT)
    compiled = CompiledCandidate(built.result.model_copy(update={"duration_s": 51.7}), None, built.sass)
    r = RecordedJudge.open(str(RECORDED), "hopper").judge(source, PROBLEM, HOPPER, compiled=compiled)
    assert r.status is EvaluationStatus.RUNTIME_ERROR and r.recorded is not None
    assert r.reason == "RuntimeError: cuTensorMapEncodeTiled failed with code 1"
    assert r.log.startswith("Traceback (most recent call last):")  # the whole log stays for the feedback
    assert r.recorded.label == "NVIDIA H200, driver 580.159.04, 2026-12-01"
    # stage times are this judgement's: the CPU stage's 51.7 s build happened elsewhere (compile.duration_s)
    assert set(r.stage_seconds) == {"total"} and r.stage_seconds["total"] < 51.7
    assert r.compile is not None and r.compile.duration_s == 51.7


def test_a_recorded_verdict_from_before_work_shares_gets_its_share_from_its_recorded_counts():
    """The H200 verdicts of 2026-12-01 predate work shares: the reused verdict is credited by the judge's own rule
    from its recorded rows (our TMA + wgmma GEMM: share 1.0), so adapt's default target credit can use it."""
    from ptxcore.judge.backends.recorded import RecordedJudge

    source = _recorded_source("PASSED", executed=True)
    built = candidate(StaticTarget.PRESENT)
    compiled = CompiledCandidate(built.result, None, built.sass)
    judge = RecordedJudge.open(str(RECORDED), "hopper")
    hit, *_ = [v for k, v in judge.verdicts.items() if k[0] == text_sha256(source)]
    assert hit.target_instruction.work is None  # as recorded
    r = judge.judge(source, PROBLEM, HOPPER, compiled=compiled)
    work = r.target_instruction.work
    assert r.status is EvaluationStatus.PASSED and r.recorded is not None
    assert work is not None and work.carries is TargetWork.CARRIES and work.flops_share == 1.0
    assert work.target_flops == 2 * 8192 * 7168 * 5120


def test_a_no_gpu_judgement_of_a_given_build_times_only_itself():
    built = candidate(StaticTarget.PRESENT)
    compiled = CompiledCandidate(built.result.model_copy(update={"duration_s": 51.7}), None, built.sass)
    r = NoGpuJudge().judge("src", PROBLEM, HOPPER, compiled=compiled)
    assert set(r.stage_seconds) == {"total"} and r.stage_seconds["total"] < 1.0
