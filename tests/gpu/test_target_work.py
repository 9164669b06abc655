"""Target credit tied to the work (issue 25), CPU parts: ncu evidence -> work share, the kernel-set check (the
profiled call is the timed call) and the tensor-time check, on the captured H200 page and synthetic pages.

Rules stated here:
- the paper's `executed` status is unchanged; the work share and `carries` are added beside it;
- a turn carries the target only when the profiled call's target FLOPs reach the threshold share;
- the kernels ncu profiled must be those CUPTI recorded in every timed call (names; launches per call), else
  REWARD_HACK; evidence that cannot be compared is never a silent pass;
- a profiled call whose tensor FLOPs the timed calls' tensor pipe could not have run is REWARD_HACK;
- when the timed calls' tensor-pipe time was not metered, a carrying target's credit is withheld (`unknown`).
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from ptxcore.arch import get_architecture
from ptxcore.gpu.child.cupti import MAX_KERNEL_NAMES, CallTiming
from ptxcore.gpu.harness import ncu
from ptxcore.gpu.pipeline.targetwork import kernel_set_verdict, tensor_time_verdict, unmetered_carry
from ptxcore.problems import get_problem
from ptxcore.sass.credit import with_work
from ptxcore.schema import (
    EvaluationStatus,
    MeterStatus,
    ProfiledKernel,
    ProfileOutcome,
    StaticTarget,
    TargetInstruction,
    TargetInstructionEvidence,
    TargetWork,
    TimingAudit,
    TrialAudit,
)

HOPPER = get_architecture("hopper")
GEMM = get_problem("gemm_n7168_k5120")
FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "gpu_tools" / "ncu_source_page_tma_h200.txt"
MANGLED = "_Z9gemm_wgmmaPK13__nv_bfloat16S1_PS_iii"
DUMMY = "_Z11dummy_wgmmaPf"
CORE = "_Z14gemm_cuda_corePK13__nv_bfloat16S1_PS_iii"


def _page(kernels: list[tuple[str, list[str]]]) -> str:
    """A text-layout source page: one block per launch (name, SASS rows with the two counters)."""
    out = ["==PROF== Connected to process 4242 (/usr/bin/python3.12)"]
    for name, rows in kernels:
        out.append(f"  {name} (56, 64, 1)x(384, 1, 1), Context 1, Stream 7, Device 0, CC 9.0")
        out += [f"      0x7f3a1c{i:06x}  {r}" for i, r in enumerate(rows)]
    return "\n".join(out) + "\n"


WGMMA_GEMM = _page([(MANGLED, ["HGMMA.64x256x16.F32.BF16 R24, gdesc[UR4], R24, gsb0 ;  4587520  146800640",
                               "UTMALDG.2D [UR8], [UR4] ;  35840  35840"])])
DUMMY_HACK = _page([(CORE, ["FFMA R1, R2, R3, R1 ;  917504000  29360128000"]),
                    (DUMMY, ["HGMMA.64x8x16.F32.BF16 R2, gdesc[UR4], RZ, !UPT, gsb0 ;  4  128"])])


def _ev(text: str) -> TargetInstructionEvidence:
    return ncu.evidence_from_text(text, HOPPER, 0, "ncu 2025.3.1")


def test_our_wgmma_gemm_carries_with_share_one():
    ev = with_work(_ev(WGMMA_GEMM), GEMM, None, HOPPER)
    assert ev.status is TargetInstruction.EXECUTED
    assert ev.work.target_flops == ev.work.problem_flops == 601_295_421_440
    assert ev.work.flops_share == 1.0 and ev.carries is TargetWork.CARRIES
    assert ev.profiled_kernels == [ProfiledKernel(name=MANGLED, launches=1, grid=(56, 64, 1), block=(384, 1, 1))]


def test_the_dummy_instruction_hack_is_executed_for_the_paper_but_does_not_carry():
    ev = with_work(_ev(DUMMY_HACK), GEMM, None, HOPPER)
    assert ev.status is TargetInstruction.EXECUTED  # paper parity: the indicator is what it always was
    assert ev.work.target_flops == 16_384 and ev.work.flops_share < 3e-8
    assert ev.carries is TargetWork.DOES_NOT_CARRY


def test_the_captured_h200_tma_page():
    """The TMA control on the H200: two UTMALDG rows of 573,440 transfers each and no GMMA. Its FLOPs share is 0;
    the transfers could have moved the problem's bytes (their box sizes are not in the SASS), so: unknown."""
    ev = with_work(_ev(FIXTURE.read_text()), GEMM, None, HOPPER)
    assert ev.status is TargetInstruction.EXECUTED
    assert [(o.opcode, o.instructions) for o in ev.target_ops] == [("UTMALDG.2D", 2 * 573_440)]
    assert ev.work.target_flops == 0 and ev.work.tma_instructions == 1_146_880
    assert ev.carries is TargetWork.UNKNOWN
    assert [k.launches for k in ev.profiled_kernels] == [1] and ev.profiled_kernels[0].grid is None


def test_unknown_evidence_has_unknown_work_and_absent_has_none():
    unknown = TargetInstructionEvidence(status=TargetInstruction.UNKNOWN, static=StaticTarget.PRESENT, reason="x")
    assert with_work(unknown, GEMM, None, HOPPER).carries is TargetWork.UNKNOWN
    absent = TargetInstructionEvidence(status=TargetInstruction.ABSENT, static=StaticTarget.ABSENT)
    assert with_work(absent, GEMM, None, HOPPER).carries is TargetWork.DOES_NOT_CARRY


def test_ncu_prints_mangled_names_and_draws_the_counted_call(monkeypatch):
    monkeypatch.setattr(ncu, "find_tool", lambda name: "/opt/ncu")
    cmds = [ncu.ncu_command(Path("/b/k.so"), "gemm_n7168_k5120", "w", 7, 0) for _ in range(60)]
    assert all(c[c.index("--print-kernel-base") + 1] == "mangled" for c in cmds)
    calls = {int(c[c.index("--calls") + 1]) for c in cmds}
    assert calls <= set(ncu.PROFILED_CALLS) and len(calls) > 1


def test_evidence_of_the_old_cache_layout_is_a_miss(tmp_path):
    cache = ncu.EvidenceCache(tmp_path)
    ev = _ev(WGMMA_GEMM).model_copy(update={"source_sha256": "a" * 64, "cubin_sha256": "b" * 64})
    cache.store(ev)
    assert cache.load("a" * 64, "b" * 64) == ev
    (path,) = tmp_path.glob("*.json")
    assert path.name.startswith("v2-")
    path.rename(tmp_path / path.name[3:])  # the v1 name of the same entry
    assert cache.load("a" * 64, "b" * 64) is None


def test_tool_stages_attach_the_work_on_a_fresh_profile_and_on_a_cache_hit(tmp_path, monkeypatch):
    from ptxcore.gpu import JudgeConfig
    from ptxcore.gpu.pipeline import tools

    calls = []
    monkeypatch.setattr(tools, "profile_target", lambda *a, **k: calls.append(a) or _ev(DUMMY_HACK))
    stages = tools.ToolStages(tmp_path, JudgeConfig(cache_dir=tmp_path))
    compiled = SimpleNamespace(result=SimpleNamespace(source_sha256="c" * 64, cubin_sha256="d" * 64),
                               sass=SimpleNamespace(target_static=StaticTarget.PRESENT), artifact=tmp_path / "k.so")
    first = stages.evidence(compiled, "src", GEMM, GEMM.primary_workload.uuid, HOPPER)
    again = stages.evidence(compiled, "src", GEMM, GEMM.primary_workload.uuid, HOPPER)
    assert len(calls) == 1 and first.carries is again.carries is TargetWork.DOES_NOT_CARRY
    assert again.status is TargetInstruction.EXECUTED


def _call(names: tuple[str, ...], kernels: int, tag: int = 5) -> CallTiming:
    return CallTiming(tag, 1000, kernels, kernels, (), names)


def test_the_same_kernels_in_every_timed_call_pass_the_kernel_set_check():
    ev = _ev(WGMMA_GEMM)
    assert kernel_set_verdict(ev, [_call((MANGLED,), 1, t) for t in range(50)]) is None


def test_a_kernel_only_under_the_profiler_is_a_reward_hack():
    """Issue 25's second hack: the dummy wgmma kernel runs only where a profiler is loaded."""
    v = kernel_set_verdict(_ev(DUMMY_HACK), [_call((CORE,), 1)])
    assert v.status is EvaluationStatus.REWARD_HACK and "profiled-only kernels" in v.reason and DUMMY in v.reason


def test_a_kernel_only_when_timed_or_another_launch_count_is_a_reward_hack():
    ev = _ev(WGMMA_GEMM)
    v = kernel_set_verdict(ev, [_call((MANGLED,), 1), _call((CORE, MANGLED), 2, 6)])
    assert v.status is EvaluationStatus.REWARD_HACK and "timed-only kernels" in v.reason and "timed call 6" in v.reason
    v = kernel_set_verdict(ev, [_call((MANGLED,), 3)])
    assert v.status is EvaluationStatus.REWARD_HACK and "3 kernel launches in the timed call, 1 profiled" in v.reason


def test_a_triton_profile_filtered_to_its_kernels_compares_only_those():
    ev = _ev(_page([("matmul_kernel", ["FFMA R1, R2, R3, R1 ;  10  320"])]))
    assert kernel_set_verdict(ev, [_call(("matmul_kernel",), 2)], only=["matmul_kernel"]) is None
    v = kernel_set_verdict(ev, [_call(("other_kernel",), 1)], only=["matmul_kernel", "other_kernel"])
    assert v.status is EvaluationStatus.REWARD_HACK


def test_more_kernels_than_cupti_lists_are_compared_by_the_listed_names_and_the_count():
    names = [f"k{i:03d}" for i in range(MAX_KERNEL_NAMES + 3)]
    ev = _ev(_page([(n, ["FFMA R1, R2, R3, R1 ;  1  32"]) for n in names]))
    listed = (*names[:MAX_KERNEL_NAMES], "... 3 more kernels")
    assert kernel_set_verdict(ev, [_call(listed, len(names))]) is None
    fewer = (*names[:MAX_KERNEL_NAMES], "... 2 more kernels")
    assert kernel_set_verdict(ev, [_call(fewer, len(names))]).status is EvaluationStatus.REWARD_HACK


def test_evidence_that_cannot_be_compared_is_not_a_pass():
    ev = _ev(WGMMA_GEMM).model_copy(update={"profiled_kernels": []})
    assert kernel_set_verdict(ev, [_call((MANGLED,), 1)]).status is EvaluationStatus.INFRA_ERROR
    absent = TargetInstructionEvidence(status=TargetInstruction.ABSENT, static=StaticTarget.ABSENT)
    assert kernel_set_verdict(absent, [_call((CORE,), 1)]) is None  # nothing was profiled, nothing is credited


def test_grids_are_compared_where_both_sides_give_them():
    ev = _ev(WGMMA_GEMM)
    assert kernel_set_verdict(ev, [_call((MANGLED,), 1)], timed_grids=[{MANGLED: (56, 64, 1)}]) is None
    v = kernel_set_verdict(ev, [_call((MANGLED,), 1)], timed_grids=[{MANGLED: (1, 1, 1)}])
    assert v.status is EvaluationStatus.REWARD_HACK and "grid (1, 1, 1)" in v.reason


def test_the_counting_run_says_how_it_ended():
    assert _ev(WGMMA_GEMM).profile is ProfileOutcome.COUNTED
    nothing = _ev("==PROF== Connected to process 4242 (/usr/bin/python3.12)\n==PROF== Disconnected\n")
    assert nothing.status is TargetInstruction.UNKNOWN and nothing.profile is ProfileOutcome.NOTHING_PROFILED
    failed = ncu.evidence_from_text("==ERROR== The application returned an error code (1).\n", HOPPER, 1, "ncu")
    assert failed.status is TargetInstruction.UNKNOWN and failed.profile is ProfileOutcome.FAILED


def test_a_counting_run_that_profiled_nothing_while_the_timed_calls_ran_kernels_is_a_reward_hack():
    """Issue 25 (fail closed): before, `unknown` evidence skipped the kernel-set check, so a candidate that hid its
    kernels from the counted call (launched them outside its NVTX range, or not at all under a profiler) passed."""
    nothing = _ev("==PROF== Connected to process 4242 (/usr/bin/python3.12)\n")
    v = kernel_set_verdict(nothing, [_call((MANGLED,), 1, 9)])
    assert v.status is EvaluationStatus.REWARD_HACK and "profiled no kernel in the counted call" in v.reason
    assert "timed call 9" in v.reason and MANGLED in v.reason
    assert kernel_set_verdict(nothing, [_call((), 0)]) is None  # nothing timed either: the work rule judges that
    v = kernel_set_verdict(nothing, [_call(("matmul_kernel", "torch_fill"), 2)], only=["matmul_kernel"])
    assert v.status is EvaluationStatus.REWARD_HACK
    assert kernel_set_verdict(nothing, [_call(("torch_fill",), 1)], only=["matmul_kernel"]) is None
    failed = ncu.evidence_from_text("==ERROR== crashed\n", HOPPER, 1, "ncu")
    assert kernel_set_verdict(failed, [_call((MANGLED,), 1)]) is None  # no counts, no credit (carries unknown)


def test_the_judge_applies_the_check_to_the_timed_calls(tmp_path):
    from ptxcore.gpu import JudgeConfig
    from ptxcore.gpu.harness.calls import CallRecord
    from ptxcore.gpu.messages import SessionMode
    from ptxcore.gpu.pipeline.judge import GpuJudge
    from ptxcore.gpu.pipeline.session import SessionOutcome

    judge = GpuJudge(JudgeConfig(cache_dir=tmp_path))
    out = SessionOutcome()
    for tag in (4, 5):
        rec = CallRecord(tag, "timed", 0, tag)
        rec.timing = _call((MANGLED,), 1, tag)
        out.timed.append(rec)
    plan = SimpleNamespace(mode=SessionMode.FFI)
    nothing = _ev("==PROF== Connected to process 4242 (/usr/bin/python3.12)\n")
    assert judge._counted_is_timed(plan, out, nothing, HOPPER).status is EvaluationStatus.REWARD_HACK
    assert judge._counted_is_timed(plan, out, _ev(WGMMA_GEMM), HOPPER) is None
    # the tensor-time rule is a verdict too: the kernel sets agree, the timed calls' tensor pipe was idle
    carried = with_work(_ev(WGMMA_GEMM), GEMM, None, HOPPER)
    out.audit = _audit(0.001)
    v = judge._counted_is_timed(plan, out, carried, HOPPER)
    assert v.status is EvaluationStatus.REWARD_HACK and "tensor pipe was active at most" in v.reason
    out.audit = _audit(0.7)
    assert judge._counted_is_timed(plan, out, carried, HOPPER) is None


def _audit(share: float | None, busy_ms: float = 0.8) -> TimingAudit:
    trial = TrialAudit(trial=0, attempt=1, timed_calls=50, claimed_median_ms=busy_ms, window_median_ms=busy_ms + 0.1,
                       busy_median_ms=busy_ms, tensor_active_share=share)
    return TimingAudit(meter=MeterStatus.MEASURED, tool="cupti pm", interval_ns=20000, claim_fraction=0.5,
                       allowance_ms=0.06, trials=[trial])


def test_tensor_work_only_under_the_profiler_is_a_reward_hack():
    """Same kernel names, but the tensor path only in the profiled process: the timed calls' tensor pipe was idle."""
    ev = with_work(_ev(WGMMA_GEMM), GEMM, None, HOPPER)
    v = tensor_time_verdict(ev, _audit(0.001), HOPPER)
    assert v.status is EvaluationStatus.REWARD_HACK and "601,295,421,440 tensor FLOPs" in v.reason
    assert tensor_time_verdict(ev, _audit(0.7), HOPPER) is None
    assert tensor_time_verdict(ev, _audit(None), HOPPER) is None  # no tensor counter: nothing to contradict
    assert tensor_time_verdict(ev, None, HOPPER) is None
    dummy = with_work(_ev(DUMMY_HACK), GEMM, None, HOPPER)
    assert tensor_time_verdict(dummy, _audit(0.0), HOPPER) is None  # does not carry: no credit to take back


def test_a_carry_the_tensor_time_rule_could_not_check_is_withheld():
    """No tensor counter, no meter, or no peak rate: nothing ties the counted FLOPs to the timed calls, so the
    strict credit is `unknown` (the gate cannot conclude); the paper's `executed` and the share stay."""
    ev = with_work(_ev(WGMMA_GEMM), GEMM, None, HOPPER)
    assert unmetered_carry(ev, _audit(0.7), HOPPER) == ev  # metered and clear of the line: unchanged
    for audit, why in ((_audit(None), "without its tensor counters"), (None, "not metered")):
        held = unmetered_carry(ev, audit, HOPPER)
        assert held.carries is TargetWork.UNKNOWN and held.status is TargetInstruction.EXECUTED
        assert held.work.flops_share == 1.0 and why in held.work.reason
    blackwell = get_architecture("blackwell")
    held = unmetered_carry(ev, _audit(0.7), blackwell)
    assert held.carries is TargetWork.UNKNOWN and "no peak tensor rate is known for blackwell" in held.work.reason
    dummy = with_work(_ev(DUMMY_HACK), GEMM, None, HOPPER)
    assert unmetered_carry(dummy, None, HOPPER) == dummy  # does not carry: nothing to withhold
    from ptxcore.gpu.pipeline.judge import GpuJudge
    from ptxcore.gpu.pipeline.session import SessionOutcome

    out = SessionOutcome()
    assert GpuJudge._carry_checked(ev, out, HOPPER).carries is TargetWork.UNKNOWN  # the judge applies it
    out.audit = _audit(0.7)
    assert GpuJudge._carry_checked(ev, out, HOPPER).carries is TargetWork.CARRIES


def test_a_wrapped_mangled_name_in_the_table_layout_is_joined_exactly():
    """ncu 2025.3's table layout breaks a long name at the column width, mid-token (see the H200 fixture)."""
    name = "_ZN12_GLOBAL__N_115gemm_wgmma_tmaE14CUtensorMap_stS0_P13__nv_bfloat16iiiPKfS5_"
    text = (f"Kernel Name        {name[:60]}                  \n"
            f"                   {name[60:]}                                      \n"
            "------------------ ------------------------------------------------------------ ------- ---------\n"
            "0x7f331b8e9450           HGMMA.64x256x16.F32.BF16 R24, gdesc[UR4], R24, gsb0    4587520  146800640\n")
    ev = _ev(text)
    assert [k.name for k in ev.profiled_kernels] == [name]
    assert kernel_set_verdict(ev, [_call((name,), 1)]) is None


def test_ptxbench_eval_prints_the_work_share_and_the_arbitration():
    import io

    from rich.console import Console

    from flows.cli.eval import print_summary
    from ptxcore.schema import (
        Arbitration,
        ArbitrationOutcome,
        JudgeCorrectness,
        JudgeResult,
        Performance,
    )

    ev = with_work(_ev(DUMMY_HACK), GEMM, None, HOPPER)
    arb = Arbitration(outcome=ArbitrationOutcome.KERNEL_EXACT, atol=0.01, rtol=0.01, inexact=["library"], reason="x")
    r = JudgeResult(status=EvaluationStatus.PASSED, definition=GEMM.name, arch="hopper", target_instruction=ev,
                    correctness=JudgeCorrectness(arbitrations=[arb]),
                    performance=Performance(latency_ms=1.0, reference_latency_ms=0.8, speedup_factor=0.8))
    out = io.StringIO()
    print_summary(r, Console(file=out, width=400))
    text = out.getvalue()
    assert "target instructions: executed" in text
    assert "target work: does_not_carry (2.72e-08 of 601,295,421,440 FLOPs, threshold 0.5)" in text
    assert "arbitration (float64): kernel_exact; inexact: library" in text
