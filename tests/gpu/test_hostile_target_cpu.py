"""Issue 25's target-credit controls h15-h17 on the CPU: each fixture built by the compile gate, its kernels'
mangled names and target SASS rows read from the build, then the counted call (an Nsight Compute source page) and
the timed calls (CUPTI's per-call records) written as the fixture's host code makes them in each process, and
judged by the judge's own rules (`with_work`, `kernel_set_verdict`).

The rule (judge `_counted_is_timed`): every timed call's kernel set (names, launches) equals the profiled call's.
- h15 (a dummy wgmma every call): the sets agree, the paper's indicator says executed, the work does not carry;
- h16 (the dummy only under a profiler or sanitizer): the profiled call has a kernel no timed call ran;
- h17 (the real wgmma path on every other call): whichever call ncu counts, half the timed calls differ.
- h18 (one kernel that burns the problem's FLOPs in wgmma only under a tool): the sets agree and the work carries;
  the tensor-time rule (`tensor_time_verdict`) takes the credit back, on the timed calls' tensor time as the H200
  metered it for the same CUDA-core GEMM (control 01, 2026-12-02).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from ptxcore.arch import get_architecture
from ptxcore.compile import BuildOptions, CompileCache, compile_candidate
from ptxcore.gpu.child.cupti import CallTiming
from ptxcore.gpu.harness import ncu
from ptxcore.gpu.pipeline.targetwork import kernel_set_verdict, tensor_time_verdict
from ptxcore.problems import get_problem, problem_work
from ptxcore.sass.credit import with_work
from ptxcore.sass.parse import parse_sass
from ptxcore.sass.verdict import dump_sass
from ptxcore.schema import (
    CompileStatus,
    EvaluationStatus,
    MeterStatus,
    StaticTarget,
    TargetInstruction,
    TargetWork,
    TimingAudit,
    TrialAudit,
)

HOSTILE = Path(__file__).resolve().parents[1] / "fixtures" / "hostile"
HOPPER = get_architecture("hopper")
GEMM = get_problem("gemm_n7168_k5120")
TIMED_TAGS = [4, 5, 6, 8, 9, 10, 12, 13, 14]
"""The timed calls' numbers in a session of 3 trials x (1 warm-up + 3 timed) after 3 correctness calls
(test_hostile_gpu's configuration): the candidate's process has made `tag` calls before each."""


def _built(name: str, cache_root: Path) -> dict[str, list[str]]:
    """kernel (mangled, as CUPTI and `ncu --print-kernel-base mangled` name it) -> its HGMMA rows' SASS text."""
    c = compile_candidate((HOSTILE / name).read_text(), BuildOptions(HOPPER), CompileCache(cache_root / "compile"))
    assert c.result.status is CompileStatus.COMPILED, c.result.log[-2000:]
    assert c.sass.target_static is StaticTarget.PRESENT, c.sass
    kernels: dict[str, list[str]] = {}
    for inst in parse_sass(dump_sass(c.artifact)):
        rows = kernels.setdefault(inst.function, [])
        if inst.mnemonic == "HGMMA":
            rows.append(inst.text.strip().rstrip(";").strip())
    return kernels


@pytest.fixture(scope="module")
def builds(compile_cache_dir) -> dict[str, dict[str, list[str]]]:
    return {n: _built(f"{n}.cu", compile_cache_dir) for n in
            ("h15_dummy_wgmma_every_call", "h16_wgmma_only_under_profiler", "h17_wgmma_on_some_calls",
             "h18_tensor_path_only_under_profiler")}


def _kernel(kernels: dict[str, list[str]], part: str) -> str:
    (name,) = [k for k in kernels if part in k]
    return name


def _page(kernels: dict[str, list[str]], launched: list[str]) -> str:
    """The source page of one counted call: per launch its header, its HGMMA rows with counts giving the problem's
    FLOPs to the wgmma GEMM and one instruction to the dummy, and one FFMA row for a CUDA-core kernel."""
    flops = problem_work(GEMM, None).flops
    out = ["==PROF== Connected to process 4242 (/usr/bin/python3)"]
    for name in launched:
        out.append(f"  {name} (56, 64, 1)x(128, 1, 1), Context 1, Stream 7, Device 0, CC 9.0")
        rows = kernels[name] or ["FFMA R1, R2, R3, R1"]
        for i, text in enumerate(rows):
            if "64x8x16" in text:
                warps = 4  # one warpgroup instruction
            elif text.startswith("HGMMA.64x256x16"):
                warps = 4 * flops // (2 * 64 * 256 * 16) // len(rows)
            else:
                warps = 1_000_000
            out.append(f"      0x7f3a1c{i:06x}  {text} ;  {warps}  {32 * warps}")
    return "\n".join(out) + "\n"


def _calls(kernels_of: Callable[[int, bool], list[str]]) -> list[CallTiming]:
    return [CallTiming(tag, 1000, len(k), len(k), (), tuple(sorted(set(k))))
            for tag in TIMED_TAGS for k in [kernels_of(tag, False)]]


def _profiled(kernels: dict[str, list[str]], kernels_of: Callable[[int, bool], list[str]], calls: int):
    """The evidence of ncu's run of `calls` calls (the last counted, under the tool), with its work share."""
    ev = ncu.evidence_from_text(_page(kernels, kernels_of(calls - 1, True)), HOPPER, 0, "ncu 2025.3.1")
    return with_work(ev, GEMM, None, HOPPER)


def test_h15_a_dummy_wgmma_every_call_is_executed_but_carries_nothing(builds):
    k = builds["h15_dummy_wgmma_every_call"]
    gemm, dummy = _kernel(k, "gemm_nt_kernel"), _kernel(k, "tiny_wgmma")
    assert k[dummy] == ["HGMMA.64x8x16.F32.BF16 R24, gdesc[UR4], RZ, !UPT, gsb0"] and k[gemm] == []

    def kernels_of(call: int, under_tool: bool) -> list[str]:
        return [gemm, dummy]

    for n in ncu.PROFILED_CALLS:
        ev = _profiled(k, kernels_of, n)
        assert ev.status is TargetInstruction.EXECUTED  # the paper's indicator, unchanged
        assert ev.carries is TargetWork.DOES_NOT_CARRY and ev.work.target_flops == 16_384
        assert kernel_set_verdict(ev, _calls(kernels_of)) is None  # the counted call is the timed calls


def test_h16_a_wgmma_only_under_a_profiler_is_a_reward_hack(builds):
    k = builds["h16_wgmma_only_under_profiler"]
    gemm, dummy = _kernel(k, "gemm_nt_kernel"), _kernel(k, "tiny_wgmma")

    def kernels_of(call: int, under_tool: bool) -> list[str]:
        return [gemm, dummy] if under_tool else [gemm]

    for n in ncu.PROFILED_CALLS:
        ev = _profiled(k, kernels_of, n)
        assert ev.status is TargetInstruction.EXECUTED
        v = kernel_set_verdict(ev, _calls(kernels_of))
        assert v is not None and v.status is EvaluationStatus.REWARD_HACK, v
        assert "profiled-only kernels" in v.reason and "tiny_wgmma" in v.reason and "timed call 4" in v.reason


def test_h17_the_wgmma_path_on_every_other_call_is_a_reward_hack_whichever_call_is_counted(builds):
    k = builds["h17_wgmma_on_some_calls"]
    wgmma, core = _kernel(k, "gemm_tma_wgmma_kernel"), _kernel(k, "gemm_nt_kernel")
    assert all(r.startswith("HGMMA.64x256x16.F32.BF16") for r in k[wgmma]) and k[wgmma]

    def kernels_of(call: int, under_tool: bool) -> list[str]:
        return [wgmma] if call % 2 == 0 else [core]

    seen = set()
    for n in ncu.PROFILED_CALLS:
        ev = _profiled(k, kernels_of, n)
        seen.add(ev.carries)
        v = kernel_set_verdict(ev, _calls(kernels_of))
        assert v is not None and v.status is EvaluationStatus.REWARD_HACK, (n, v)
        assert "profiled call is not the timed call" in v.reason
    assert seen == {TargetWork.CARRIES, TargetWork.DOES_NOT_CARRY}  # a counted wgmma call would have carried it


CONTROL_01_TRIALS = ((25.8257, 0.00010201092547128313), (25.8379, 0.00010191463910851069),
                     (25.8365, 0.00010199763976275095))
"""(metered busy median ms, tensor-pipe share) of the timed trials of control 01 (the same CUDA-core GEMM as h18's
timed path) on the H200, 2026-12-02 fifth session (benchmarks/device/results/h200-2026-12-02e/hostile.jsonl)."""


def test_h18_one_kernel_with_its_tensor_work_only_under_a_profiler_loses_the_credit(builds):
    k = builds["h18_tensor_path_only_under_profiler"]
    (gemm,) = k  # one kernel: the profiled and the timed calls launch the same thing
    burn = [r for r in k[gemm] if r.startswith("HGMMA.64x8x16.F32.BF16")]
    # besides the loop's (unrolled) rows, ptxas adds one zero-register HGMMA the credit rules exclude
    assert burn and [r for r in k[gemm] if r not in burn] == ["HGMMA.64x8x16.F16 RZ, gdesc[URZ], RZ, !UPT, gsb0"]
    flops = problem_work(GEMM, None).flops
    per_row = flops // 16_384 // len(burn)  # the burn's m64n8k16 instructions, spread over the unrolled rows
    page = "\n".join(["==PROF== Connected to process 4242 (/usr/bin/python3)",
                      f"  {gemm} (112, 128, 1)x(256, 1, 1), Context 1, Stream 7, Device 0, CC 9.0",
                      *(f"      0x7f3a1c{i:06x}  {text} ;  {4 * per_row}  {128 * per_row}"
                        for i, text in enumerate(burn))]) + "\n"
    ev = with_work(ncu.evidence_from_text(page, HOPPER, 0, "ncu 2025.3.1"), GEMM, None, HOPPER)
    assert ev.status is TargetInstruction.EXECUTED and ev.carries is TargetWork.CARRIES
    assert kernel_set_verdict(ev, _calls(lambda call, under_tool: [gemm])) is None  # the sets cannot tell
    trials = [TrialAudit(trial=i, attempt=1, timed_calls=50, claimed_median_ms=busy - 0.15,
                         window_median_ms=busy + 0.6, busy_median_ms=busy, tensor_active_share=share)
              for i, (busy, share) in enumerate(CONTROL_01_TRIALS)]
    audit = TimingAudit(meter=MeterStatus.MEASURED, tool="cupti pm-sampling 13.3.1", interval_ns=263_631,
                        claim_fraction=0.5, allowance_ms=0.55, trials=trials)
    v = tensor_time_verdict(ev, audit, HOPPER)
    assert v is not None and v.status is EvaluationStatus.REWARD_HACK, v
    assert "tensor pipe was active at most 0.00264 ms per call" in v.reason, v.reason
