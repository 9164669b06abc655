"""build_candidate: the CPU stage dispatches on the language (Triton: the validator; never nvcc)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ptxcore.arch import get_architecture
from ptxcore.compile import BuildOptions, UnsupportedLanguage, build_candidate
from ptxcore.compile import language as language_module
from ptxcore.schema import CompileStatus, Language, text_sha256

HOPPER = BuildOptions(arch=get_architecture("hopper"))
CONTROLS = Path(__file__).resolve().parents[1] / "fixtures" / "controls" / "triton"
SOLUTION = Path(__file__).resolve().parents[2] / "solutions" / "triton" / "gemm_n7168_k5120" / "tma_persistent.py"


def test_a_valid_triton_kernel_passes_the_validator_and_builds_nothing(monkeypatch):
    monkeypatch.setattr(language_module, "compile_candidate", lambda *a, **k: pytest.fail("nvcc for Triton"))
    source = SOLUTION.read_text()
    c = build_candidate(source, HOPPER, language=Language.TRITON)
    assert c.result.status is CompileStatus.COMPILED and c.result.verdict is None
    assert c.artifact is None and c.sass is None and c.result.cache_key is None
    assert c.result.flags == ["triton"] and c.result.source_sha256 == text_sha256(source)
    assert c.result.arch == "hopper"


@pytest.mark.parametrize("control,rule", [("02_torch_fallback_getattr.py", "reflection"),
                                          ("03_torch_fallback_alias.py", "module-as-value"),
                                          ("04_side_stream.py", "side-stream")])
def test_a_hostile_triton_kernel_is_rejected_with_its_rule(control, rule):
    c = build_candidate((CONTROLS / control).read_text(), HOPPER, language="triton")
    assert c.result.status is CompileStatus.REJECTED and f"[{rule}]" in c.result.reason


def test_a_syntax_error_is_a_compile_error():
    c = build_candidate("import triton\ndef run(A, B, C)\n    pass\n", HOPPER, language=Language.TRITON)
    assert c.result.status is CompileStatus.COMPILE_ERROR and "SyntaxError" in c.result.reason


def test_cuda_goes_to_the_nvcc_stage():
    c = build_candidate('#include <cublas_v2.h>\nvoid run() {}\n', HOPPER)  # rejected before nvcc runs
    assert c.result.status is CompileStatus.REJECTED and "cuBLAS" in c.result.reason


@pytest.mark.parametrize("lang", [Language.PYTHON, Language.TILELANG, Language.CPP])
def test_languages_nothing_judges_raise(lang):
    with pytest.raises(UnsupportedLanguage, match=lang.value):
        build_candidate("x = 1\n", HOPPER, language=lang)
