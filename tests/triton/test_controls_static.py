"""The Triton adversarial controls on the CPU: each gets its expected validator verdict; the one that must
show ABSENT target instructions compiles (Triton, sm_90a, no GPU) without GMMA/TMA; the compile-error
control fails in Triton's compiler with a COMPILE_ERROR classification."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ptxcore.arch import get_architecture
from ptxcore.schema import StaticTarget
from ptxcore.triton.evidence import cache_kernels, static_evidence
from ptxcore.triton.loader import COMPILE_ERROR, classify_fault, configure_cache
from ptxcore.triton.rules import Rule
from ptxcore.triton.validate import validate_triton_source

from .conftest import compile_for_hopper, import_file

CONTROLS = Path(__file__).resolve().parents[1] / "fixtures" / "controls" / "triton"
EXPECTED = json.loads((CONTROLS / "expected.json").read_text())["controls"]
GEMM_SIG = {"a_ptr": "*bf16", "b_ptr": "*bf16", "c_ptr": "*bf16", "M": "i32", "N": "i32", "K": "i32"}


def test_every_control_has_an_expectation_and_a_header():
    assert sorted(c["file"] for c in EXPECTED) == sorted(p.name for p in CONTROLS.glob("*.py"))
    for c in EXPECTED:
        header = (CONTROLS / c["file"]).read_text()
        assert "# Expected: " in header and c["verdict"] in header, c["file"]


@pytest.mark.parametrize("control", EXPECTED, ids=[c["file"] for c in EXPECTED])
def test_static_verdict(control):
    check = validate_triton_source((CONTROLS / control["file"]).read_text())
    if control["static"] is None:
        assert check.ok, [v.message() for v in check.violations]
    else:
        assert not check.ok and check.first.rule is Rule(control["static"]), [v.message() for v in check.violations]


@pytest.mark.slow
def test_mma_sync_control_has_no_target_instructions(tmp_path):
    pytest.importorskip("triton")
    configure_cache(tmp_path / "cache")
    mod = import_file(CONTROLS / "01_gemm_mma_sync.py", "ctl_mma_sync")
    sig = {**GEMM_SIG, "BM": "constexpr", "BN": "constexpr", "BK": "constexpr"}
    compile_for_hopper(mod.gemm_nt_mma_sync, sig, {"BM": 64, "BN": 64, "BK": 64}, num_warps=2, divisible=tuple(range(6)))
    static = static_evidence(cache_kernels(tmp_path / "cache"), get_architecture("hopper"))
    assert static.per_kernel == {"gemm_nt_mma_sync": StaticTarget.ABSENT}
    assert static.report.counts.get("HMMA", 0) > 0 and not static.report.family_counts.get("gmma")


def test_compile_error_control_is_a_compile_error(tmp_path):
    pytest.importorskip("triton")
    configure_cache(tmp_path / "cache")
    path = CONTROLS / "08_compile_error.py"
    mod = import_file(path, "ctl_compile_error")
    with pytest.raises(Exception) as info:
        compile_for_hopper(mod.gemm_nt_bad, {**GEMM_SIG, "BM": "constexpr"}, {"BM": 128})
    fault = classify_fault(info.value, path)
    assert fault.status == COMPILE_ERROR and "power of 2" in fault.message
