"""compute-sanitizer and Nsight Compute output parsers, on captured-format text."""

from __future__ import annotations

from ptxcore.arch import get_architecture
from ptxcore.gpu.harness.ncu import evidence_from_text, parse_source_page
from ptxcore.gpu.harness.sanitizer import MemcheckOutcome, parse_memcheck
from ptxcore.schema import TargetInstruction

MEMCHECK_ERRORS = """\
========= COMPUTE-SANITIZER
========= Invalid __global__ write of size 2 bytes
=========     at gemm_wmma(const __nv_bfloat16 *, const __nv_bfloat16 *, __nv_bfloat16 *, int, int, int)+0x1b70 in /tmp/ptxbench/compile/ab/abcd/kernel.cu:77
=========     by thread (0,0,0) in block (0,0,0)
=========     Address 0x7f2e00000000 is out of bounds
=========     and is 1099511627776 bytes after the nearest allocation at 0x7f1c00000000 of size 117440512 bytes
=========
ptxbench child: 1 call(s) completed
========= ERROR SUMMARY: 1 error
"""
MEMCHECK_CLEAN = "========= COMPUTE-SANITIZER\nptxbench child: 1 call(s) completed\n========= ERROR SUMMARY: 0 errors\n"


def test_memcheck_errors_are_counted_and_trimmed():
    outcome, errors, report = parse_memcheck(MEMCHECK_ERRORS, 86)
    assert outcome is MemcheckOutcome.ERRORS and errors == 1
    assert "Invalid __global__ write" in report and "kernel.cu:77" in report
    assert "/tmp/ptxbench" not in report and "ptxbench child" not in report


def test_memcheck_clean_and_inconclusive():
    assert parse_memcheck(MEMCHECK_CLEAN, 0)[0] is MemcheckOutcome.CLEAN
    assert parse_memcheck("Traceback (most recent call last):\n  ...\nOSError: boom\n", 1)[0] is MemcheckOutcome.INCONCLUSIVE
    assert parse_memcheck(MEMCHECK_CLEAN, 1)[0] is MemcheckOutcome.INCONCLUSIVE  # process failed, no errors


def test_a_tool_that_never_saw_the_process_end_is_not_clean_whatever_its_summary():
    """Issue 25: a detached process kept compute-sanitizer waiting; it ended with "couldn't find exit code" and,
    before this rule, a clean-looking summary let the candidate pass without a memory-safety verdict."""
    text = MEMCHECK_CLEAN.replace("========= ERROR SUMMARY", "========= Error: couldn't find exit code.\n"
                                  "========= ERROR SUMMARY")
    assert parse_memcheck(text, 0)[0] is MemcheckOutcome.LEFT_RUNNING


def test_the_left_running_outcome_fails_the_gate(tmp_path, monkeypatch):
    from types import SimpleNamespace

    from ptxcore.gpu import JudgeConfig
    from ptxcore.gpu.harness.sanitizer import MemcheckRun
    from ptxcore.gpu.pipeline import tools
    from ptxcore.problems import get_problem
    from ptxcore.schema import EvaluationStatus

    runs = [MemcheckRun(MemcheckOutcome.LEFT_RUNNING, 0, "========= Error: couldn't find exit code.", 0, 130.0)]
    monkeypatch.setattr(tools, "run_memcheck", lambda *a, **k: runs)
    stages = tools.ToolStages(tmp_path, JudgeConfig(cache_dir=tmp_path))
    result = SimpleNamespace(sanitizer=None)
    v = stages.memcheck_run("k", tmp_path / "kernel.so", get_problem("gemm_n7168_k5120"), "w", result)
    assert v.status is EvaluationStatus.RUNTIME_ERROR and "left running" in v.reason
    assert stages.memcheck_run("k", tmp_path / "kernel.so", get_problem("gemm_n7168_k5120"), "w", result) == v


NCU_TMA = """\
==PROF== Connected to process 4242 (/usr/bin/python3.12)
==PROF== Profiling "gemm_tma": 0%....50%....100% - 3 passes
[4242] python3.12@127.0.0.1
  gemm_tma(CUtensorMap_st, CUtensorMap_st, __nv_bfloat16 *, int, int, int) (56, 64, 1)x(256, 1, 1), Context 1, Stream 7, Device 0, CC 9.0
    Section: Source Counters
    # Address Source inst_executed thread_inst_executed_true
      0x7f3a1c000100  UTMALDG.2D [UR8], [UR4] ;  573440  573440
      0x7f3a1c000110  @P0 UTMAPF.L2.2D [UR4] ;  0  0
      0x7f3a1c000200  HMMA.16816.F32.BF16 R8, R12, R16, R8 ;  91750400  2936012800
      0x7f3a1c000300  HGMMA.64x8x16.F16 RZ, gdesc[URZ], RZ, !UPT, gsb0 ;  3584  114688
      0x7f3a1c000400  EXIT ;  3584  917504
"""
NCU_NO_TARGET = """\
  gemm_wmma(const __nv_bfloat16 *, const __nv_bfloat16 *, __nv_bfloat16 *, int, int, int) (56, 64, 1)x(256, 1, 1), Context 1, Stream 7, Device 0, CC 9.0
      0x7f3a1c000200  HMMA.16816.F32.BF16 R8, R12, R16, R8 ;  91750400  2936012800
"""


def test_source_page_rows_and_kernels():
    rows, kernels = parse_source_page(NCU_TMA)
    assert kernels[0].startswith("gemm_tma(") and len(rows) == 5
    assert rows[0].opcode == "UTMALDG.2D" and rows[0].thread_inst_executed_true == 573440
    assert rows[1].opcode == "UTMAPF.L2.2D"


def test_tma_executed_dummy_hgmma_and_prefetch_excluded():
    ev = evidence_from_text(NCU_TMA, get_architecture("hopper"), 0, "ncu 2025.3.1")
    assert ev.status is TargetInstruction.EXECUTED
    assert ev.family_thread_inst_executed["tma"] == 573440
    assert ev.family_thread_inst_executed["gmma"] == 0  # only the commit-closing dummy ran
    assert any("UTMALDG" in r["sass"] for r in ev.raw_rows)


def test_profiled_kernel_without_target_rows_is_not_executed():
    ev = evidence_from_text(NCU_NO_TARGET, get_architecture("hopper"), 0, "ncu")
    assert ev.status is TargetInstruction.NOT_EXECUTED


def test_ncu_failure_or_nothing_profiled_is_unknown():
    hopper = get_architecture("hopper")
    assert evidence_from_text("==ERROR== Failed to profile", hopper, 1, "ncu").status is TargetInstruction.UNKNOWN
    nothing = evidence_from_text("==PROF== Disconnected\n==WARNING== No kernels were profiled.", hopper, 0, "ncu")
    assert nothing.status is TargetInstruction.UNKNOWN and "no kernel" in nothing.reason


def test_captured_h200_table_layout():
    """ncu 2025.3.1 on the H200 (excerpt of the TMA control's profile): table layout, wrapped kernel name."""
    from pathlib import Path

    text = (Path(__file__).resolve().parents[1] / "fixtures" / "gpu_tools" / "ncu_source_page_tma_h200.txt").read_text()
    rows, kernels = parse_source_page(text)
    assert kernels == ["<unnamed>::gemm_tma(CUtensorMap_st, CUtensorMap_st, __nv_bfloat16 *, int, int, int)"]  # joined
    tma = [r for r in rows if r.opcode.startswith("UTMALDG")]
    assert len(tma) == 2 and all(r.thread_inst_executed_true == 573440 for r in tma)
    ev = evidence_from_text(text, get_architecture("hopper"), 0, "ncu 2025.3.1")
    assert ev.status is TargetInstruction.EXECUTED and ev.family_thread_inst_executed["tma"] == 2 * 573440
