"""The Triton CPU stage: the validator folded into the CompileResult a turn records."""

from __future__ import annotations

from pathlib import Path

from ptxcore.schema import CompileStatus, text_sha256
from ptxcore.triton.stage import triton_stage

REPO = Path(__file__).resolve().parents[2]
GEMM = REPO / "solutions" / "triton" / "gemm_n7168_k5120" / "tma_persistent.py"


def test_a_valid_kernel_is_compiled_with_its_jit_names():
    source = GEMM.read_text()
    result, check = triton_stage(source, "hopper")
    assert result.status is CompileStatus.COMPILED and result.source_sha256 == text_sha256(source)
    assert result.flags == ["triton"] and result.reason == ""
    assert "gemm_nt_tma_persistent" in check.jit_kernels


def test_a_violation_is_rejected_with_the_rule_in_one_line():
    source = GEMM.read_text().replace("    triton.set_allocator(_descriptor_scratch)\n",
                                      "    C.copy_(torch.matmul(A, B.T))\n")
    result, check = triton_stage(source, "hopper")
    assert result.status is CompileStatus.REJECTED
    # the first violation in source order is named: the allocator def (line 15) is no longer registered
    assert "\n" not in result.reason and result.reason.startswith("rejected [torch-empty-outside-allocator]")
    assert len(result.log.splitlines()) == len(check.violations) == 3
    assert "[torch-compute]: `torch.matmul`" in result.log and "[tensor-compute-method]: `.copy_`" in result.log


def test_a_syntax_error_is_a_compile_error():
    result, _ = triton_stage("def run(:\n", "hopper")
    assert result.status is CompileStatus.COMPILE_ERROR and "[syntax]" in result.reason
