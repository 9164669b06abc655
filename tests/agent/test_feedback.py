"""Feedback per docs/architecture.md: status, trimmed errors, ptxas report, errors or timing, target instructions."""

from ptxcore.agent import format_feedback
from ptxcore.agent.evaluation import fold_evaluation
from ptxcore.agent.feedback import trim
from ptxcore.schema import (
    CompileResult,
    CompileStatus,
    EvaluationStatus,
    JudgeCorrectness,
    JudgeResult,
    KernelResources,
    Performance,
    PtxasResources,
    SassReport,
    StaticTarget,
    TargetInstruction,
    TargetInstructionEvidence,
)

RES = PtxasResources(kernels=[KernelResources(function="gemm_kernel", arch="sm_90a", registers=168,
                                              shared_bytes=49152, spill_store_bytes=16, spill_load_bytes=8)],
                     performance_warnings=["C7510: wgmma serialized"])


def compiled(**kw) -> CompileResult:
    return CompileResult(status=CompileStatus.COMPILED, source_sha256="0" * 64, arch="hopper", resources=RES, **kw)


def sass(static=StaticTarget.PRESENT) -> SassReport:
    return SassReport(arch="hopper", target_static=static, required_families=["gmma", "tma"],
                      family_counts={"gmma": 12, "tma": 0})


def judge(status, **kw) -> JudgeResult:
    kw.setdefault("target_instruction", TargetInstructionEvidence(status=TargetInstruction.UNKNOWN))
    if status in (EvaluationStatus.PASSED, EvaluationStatus.INCORRECT_NUMERICAL):
        kw.setdefault("correctness", JudgeCorrectness(max_absolute_error=0.0))
    return JudgeResult(status=status, definition="gemm_n7168_k5120", arch="hopper", **kw)


def test_compile_error_shows_trimmed_log_and_no_judge_part():
    c = CompileResult(status=CompileStatus.COMPILE_ERROR, source_sha256="0" * 64, arch="hopper",
                      log="kernel.cu(3): error: expected a \";\"\n\n1 error detected", reason="nvcc failed")
    text = format_feedback(fold_evaluation(c, None, None), "hopper")
    assert text.splitlines()[0] == "Status: COMPILE_ERROR"
    assert 'kernel.cu(3): error: expected a ";"' in text and "Target" not in text


def test_rejected_says_why():
    c = CompileResult(status=CompileStatus.REJECTED, source_sha256="0" * 64, arch="hopper",
                      reason="uses cuBLAS (#include <cublas_v2.h>)")
    assert "Rejected before compiling: uses cuBLAS" in format_feedback(fold_evaluation(c, None, None), "hopper")


def test_wrong_result_reports_max_errors_and_ptxas_resources():
    j = judge(EvaluationStatus.INCORRECT_NUMERICAL, reason="2.5% of elements mismatch",
              correctness=JudgeCorrectness(max_absolute_error=0.75, max_relative_error=3.2))
    text = format_feedback(fold_evaluation(compiled(), sass(), j), "hopper")
    assert "max_abs_error=0.75, max_rel_error=3.2" in text
    assert "168 registers" in text and "49152 bytes static shared memory" in text and "16 bytes spill stores" in text
    assert "C7510" in text and "latency" not in text.lower()


def test_correct_result_reports_latency_speedup_and_executed_target():
    j = judge(EvaluationStatus.PASSED, performance=Performance(latency_ms=0.5, reference_latency_ms=0.8, speedup_factor=1.6),
              target_instruction=TargetInstructionEvidence(status=TargetInstruction.EXECUTED))
    text = format_feedback(fold_evaluation(compiled(), sass(), j), "hopper")
    assert "Latency 0.5000 ms; baseline 0.8000 ms; speedup 1.600x" in text
    assert "Target hopper instructions (gmma/tma): executed" in text
    assert "max_abs_error" not in text


def test_target_not_executed_and_absent():
    j = judge(EvaluationStatus.INCORRECT_SHAPE, target_instruction=TargetInstructionEvidence(status=TargetInstruction.NOT_EXECUTED))
    assert "present in the binary but NOT executed" in format_feedback(fold_evaluation(compiled(), sass(), j), "hopper")
    j = judge(EvaluationStatus.INCORRECT_SHAPE, target_instruction=TargetInstructionEvidence(status=TargetInstruction.ABSENT))
    assert "NOT found in the binary" in format_feedback(fold_evaluation(compiled(), sass(StaticTarget.ABSENT), j), "hopper")


def test_not_evaluated_says_so_and_gives_the_static_verdict():
    j = judge(EvaluationStatus.NOT_EVALUATED, reason="no hopper GPU on this machine and no profiler URL")
    ev = fold_evaluation(compiled(), sass(), j)
    text = format_feedback(ev, "hopper")
    assert "Not evaluated on a GPU: no hopper GPU" in text and "No correctness or timing" in text
    assert "static disassembly: present (gmma=12)" in text
    absent = fold_evaluation(compiled(), sass(StaticTarget.ABSENT), j)
    assert absent.target_instruction is TargetInstruction.ABSENT


def test_runtime_log_is_trimmed_and_seeds_are_hidden():
    log = "seed=20261129 trial 0\n" + "x" * 10000
    j = judge(EvaluationStatus.RUNTIME_ERROR, reason="illegal memory access", log=log)
    text = format_feedback(fold_evaluation(compiled(), sass(), j), "hopper")
    assert "20261129" not in text and "seed=<hidden>" in text
    assert "more characters trimmed" in text and len(text) < 6000
    assert trim("Seed: 42 and SEED 7") == "Seed=<hidden> and SEED=<hidden>"


def test_unjudged_languages_are_not_evaluated_rather_than_compile_errors():
    from ptxcore.agent.evaluation import language_verdict
    from ptxcore.schema import EvaluationStatus, Language

    assert language_verdict(Language.CUDA) is None
    assert language_verdict(Language.TRITON) is None  # Triton turns go through compile (validator) and judge
    verdict = language_verdict(Language.TILELANG)
    assert verdict is not None and verdict.status is EvaluationStatus.NOT_EVALUATED
    assert verdict.compile is None and verdict.speedup is None


def test_a_recorded_verdict_says_whose_it_is_wherever_a_number_appears():
    """feedback.txt of a reused H200 verdict read "Correct. Latency 0.8288 ms … verified with Nsight Compute", as if
    measured in this run."""
    from ptxcore.schema import RecordedVerdict

    rec = RecordedVerdict(source="campaigns/recorded/h200", trace_sha256="ef" * 32, gpu_name="NVIDIA H200",
                          driver_version="580.159.04", judged_at="2026-12-01T11:50:45+00:00")
    j = judge(EvaluationStatus.PASSED, performance=Performance(latency_ms=0.8288, reference_latency_ms=0.75,
                                                               speedup_factor=0.905),
              target_instruction=TargetInstructionEvidence(status=TargetInstruction.EXECUTED), recorded=rec)
    lines = format_feedback(fold_evaluation(compiled(), sass(), j), "hopper").splitlines()
    assert lines[0] == "Status: PASSED"
    assert lines[1] == ("Recorded verdict: reached earlier on NVIDIA H200, driver 580.159.04, 2026-12-01 for this "
                        "exact kernel, problem and workload, and reused here; no GPU measured anything for this turn.")
    assert lines[2].startswith("Correct (recorded). Latency 0.8288 ms")
    assert lines[-1] == ("Target hopper instructions (gmma/tma): executed (verified with Nsight Compute on NVIDIA H200, "
                         "driver 580.159.04, 2026-12-01; recorded)")
    measured = format_feedback(fold_evaluation(compiled(), sass(), j.model_copy(update={"recorded": None})), "hopper")
    assert "recorded" not in measured.lower()
