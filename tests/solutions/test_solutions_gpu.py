"""The solution library on a Hopper GPU through the real judge (marker gpu; skipped without a GPU).

Every library kernel must be PASSED; the wgmma kernels must execute their target instructions and the
generic ones have none. Latency and speedup are printed (pytest -s) for the README table, which
tools/run_solutions.sh + tools/solutions_table.py produce from the same judge.
"""

from __future__ import annotations

import pytest

from ptxcore.arch import get_architecture
from ptxcore.problems import get_problem
from ptxcore.schema import EvaluationStatus, TargetInstruction
from research.kernel_models.kernel_source import SOLUTIONS, kernel_id, library_kernels, uses_target_path

KERNELS = library_kernels()


@pytest.mark.gpu
@pytest.mark.slow
@pytest.mark.parametrize("path", KERNELS, ids=kernel_id)
def test_solution_passes_on_hopper(path):
    from ptxcore.gpu import judge_candidate

    if get_problem(path.parent.name).extension.baseline.library.value == "flashinfer":
        pytest.importorskip("flashinfer", reason="the GQA problems' baseline (FlashInfer) is not installed here")
    result = judge_candidate(path.read_text(), get_problem(path.parent.name), get_architecture("hopper"))
    perf = result.performance
    print(
        f"\n{path.relative_to(SOLUTIONS)}: {result.status.value}"
        + (
            f" {perf.latency_ms:.4f} ms vs {perf.reference_latency_ms:.4f} ms, x{perf.speedup_factor:.3f}"
            if perf
            else ""
        )
        + f", target {result.target_instruction.status.value}"
    )
    assert result.status is EvaluationStatus.PASSED, f"{result.reason}\n{result.log[-2000:]}"
    expected = TargetInstruction.EXECUTED if uses_target_path(path) else TargetInstruction.ABSENT
    assert result.target_instruction.status is expected, result.target_instruction.reason
