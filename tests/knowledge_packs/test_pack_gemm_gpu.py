"""On an H100/H200: the GEMM built only from the Hopper pack's wrappers (TMA loads + wgmma) is correct
against cuBLAS on gemm_n7168_k5120 and the judge proves the target instructions executed (ncu)."""

from __future__ import annotations

import pytest

from .conftest import PACKS

pytestmark = pytest.mark.gpu


def test_pack_gemm_passes_and_executes_wgmma_and_tma():
    from ptxcore.arch import get_architecture
    from ptxcore.gpu import judge_candidate
    from ptxcore.problems import get_problem
    from ptxcore.prompts import expand_pack_includes
    from ptxcore.schema import EvaluationStatus, TargetInstruction

    source = expand_pack_includes(PACKS / "hopper" / "examples" / "gemm_tma_wgmma.cu")
    result = judge_candidate(source, get_problem("gemm_n7168_k5120"), get_architecture("hopper"))
    assert result.status is EvaluationStatus.PASSED, f"{result.status}: {result.reason}\n{result.log}"
    assert result.target_instruction.status is TargetInstruction.EXECUTED, result.target_instruction.reason
    executed = result.target_instruction.family_thread_inst_executed
    assert executed.get("gmma", 0) > 0, executed
