"""Verdict rules over synthetic call records (no GPU)."""

from __future__ import annotations

from ptxcore.gpu.child.cupti import CallTiming
from ptxcore.gpu.harness.calls import CallRecord, Tolerance
from ptxcore.gpu.harness.compare import CompareStats
from ptxcore.gpu.pipeline.verdicts import (
    correctness_verdict,
    foreign_kernel_verdict,
    library_verdict,
    stream_verdict,
    timing_verdict,
    work_verdict,
)
from ptxcore.schema import EvaluationStatus

TOL = Tolerance(1e-2, 1e-2, 1.0)
GOOD = CompareStats(100, 0, 0, 0, 0, 0.001, 0.002)
WRONG = CompareStats(100, 40, 0, 0, 40, 3.0, 2.0)
POISON = CompareStats(100, 100, 100, 0, 100, 0.0, 0.0)


def _rec(tag: int, stats: CompareStats, phase: str = "correctness", stale: CompareStats | None = None,
         timing: CallTiming | None = None) -> CallRecord:
    r = CallRecord(tag, phase, trial=tag, index=0)
    r.stats, r.per_output, r.stale, r.timing = stats, {"C": stats}, stale, timing
    return r


def test_all_correct_gives_no_verdict():
    assert correctness_verdict([_rec(0, GOOD), _rec(1, GOOD)], TOL) is None
    assert timing_verdict([_rec(0, GOOD, "timed", stale=WRONG)], TOL) is None


def test_wrong_first_call_is_incorrect_numerical():
    v = correctness_verdict([_rec(0, WRONG)], TOL)
    assert v.status is EvaluationStatus.INCORRECT_NUMERICAL and "max abs error 3" in v.reason


def test_output_never_written_on_first_call_is_incorrect_not_a_hack():
    v = correctness_verdict([_rec(0, POISON)], TOL)
    assert v.status is EvaluationStatus.INCORRECT_NUMERICAL and "never written" in v.reason


def test_untouched_output_after_a_correct_call_is_skipped_work():
    v = correctness_verdict([_rec(0, GOOD), _rec(1, POISON)], TOL)
    assert v.status is EvaluationStatus.REWARD_HACK and "skipped work" in v.reason


def test_stale_result_on_new_inputs_is_a_result_cache():
    v = timing_verdict([_rec(0, GOOD, "warmup"), _rec(1, WRONG, "warmup", stale=GOOD)], TOL)
    assert v.status is EvaluationStatus.REWARD_HACK and "result cache" in v.reason


def test_wrong_on_permuted_inputs_without_staleness_is_incorrect():
    v = timing_verdict([_rec(1, WRONG, "timed", stale=WRONG)], TOL)
    assert v.status is EvaluationStatus.INCORRECT_NUMERICAL


def test_side_stream_work_is_a_reward_hack():
    t = CallTiming(0, 1000, 1, 1, ("gemm_kernel",))
    v = stream_verdict([_rec(0, GOOD, timing=t)])
    assert v.status is EvaluationStatus.REWARD_HACK and "gemm_kernel" in v.reason
    assert stream_verdict([_rec(0, GOOD, timing=CallTiming(0, 1000, 1, 1, ()))]) is None


def test_call_without_gpu_work_is_flagged_but_all_silent_is_left_to_the_caller():
    busy, idle = CallTiming(0, 10, 1, 1, ()), CallTiming(1, 0, 0, 0, ())
    assert work_verdict([_rec(0, GOOD, timing=busy), _rec(1, GOOD, timing=idle)]).status is EvaluationStatus.REWARD_HACK
    assert work_verdict([_rec(0, GOOD, timing=idle)]) is None
    # CUPTI proved working (the calibration memset was seen): correct outputs with no GPU work at all were
    # written some other way
    v = work_verdict([_rec(0, GOOD, timing=idle)], instrument_ok=True)
    assert v.status is EvaluationStatus.REWARD_HACK and "no GPU work" in v.reason


def test_a_call_that_ran_only_copies_computed_its_outputs_off_the_gpu():
    """Issue 25 (fail closed): CUPTI saw a memcpy but no kernel; before, such a call passed with the copy's span
    as its latency."""
    busy, copy_only = CallTiming(0, 10, 1, 1, ()), CallTiming(1, 40, 1, 0, ())
    v = work_verdict([_rec(0, GOOD, timing=busy), _rec(1, GOOD, timing=copy_only)], instrument_ok=True)
    assert v.status is EvaluationStatus.REWARD_HACK and "no kernel ran during correctness call 0 of trial 1" in v.reason
    assert work_verdict([_rec(0, GOOD, timing=busy), _rec(1, GOOD, timing=CallTiming(1, 9, 3, 2, ()))]) is None


def test_forbidden_libraries_linked_or_loaded_are_rejected():
    v = library_verdict([], ["libcudart.so.13", "libcublas.so.13"])
    assert v.status is EvaluationStatus.REJECTED and "links libcublas.so.13" in v.reason
    v = library_verdict(["/usr/local/cuda/lib64/libcudnn_graph.so.9"], [])
    assert v.status is EvaluationStatus.REJECTED and "cuDNN" in v.reason
    assert library_verdict(["/usr/lib/libcuda.so.1", "/x/libcupti.so.13"], ["libtvm_ffi.so"]) is None


def _kernels(tag: int, *names: str) -> CallRecord:
    return _rec(tag, GOOD, timing=CallTiming(tag, 1000, len(names), len(names), (), tuple(names)))


def test_triton_calls_that_run_only_launched_kernels_pass_the_foreign_kernel_rule():
    assert foreign_kernel_verdict([_kernels(0, "gemm"), _kernels(1, "gemm"), _kernels(2, "gemm", "epilogue")],
                                  {"gemm", "epilogue"}) is None


def test_a_torch_kernel_inside_a_triton_call_is_rejected():
    torch_kernel = "_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_11FillFunctorIfEE"
    v = foreign_kernel_verdict([_kernels(1, "gemm"), _kernels(2, "gemm", torch_kernel)], {"gemm"})
    assert v.status is EvaluationStatus.REJECTED and torch_kernel[:80] in v.reason and "call 0 of trial 2" in v.reason


def test_the_first_call_may_run_the_autotuners_helpers_but_no_later_call():
    helper = "_ZN2at6native18elementwise_kernel_fill"
    assert foreign_kernel_verdict([_kernels(0, "gemm", helper), _kernels(1, "gemm")], {"gemm"}) is None
    assert foreign_kernel_verdict([_kernels(0, "gemm"), _kernels(1, helper)], {"gemm"}).status is EvaluationStatus.REJECTED


def test_more_kernels_than_reported_count_as_foreign():
    from ptxcore.gpu.child.cupti import MAX_KERNEL_NAMES, ActivityRecord, CallWindow, assign_records

    names = [f"k{i:03d}" for i in range(MAX_KERNEL_NAMES + 3)]
    records = [ActivityRecord("kernel", n, 10 + i, 11 + i, 7) for i, n in enumerate(names)]
    records.append(ActivityRecord("memcpy", "memcpy", 5, 6, 7))
    (timing,), _ = assign_records([CallWindow(1, 0, 10_000)], records, {7})
    assert len(timing.kernel_names) == MAX_KERNEL_NAMES + 1 and timing.kernel_names[-1] == "... 3 more kernels"
    assert "memcpy" not in timing.kernel_names
    v = foreign_kernel_verdict([_rec(1, GOOD, timing=timing)], set(names))
    assert v is not None and v.status is EvaluationStatus.REJECTED
