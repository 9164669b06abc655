"""Our Triton solutions on the CPU: they pass the validator, compile for sm_90a with Triton's own pipeline
(no GPU), hold HGMMA + UTMALDG in SASS, and compute the right numbers in Triton's interpreter."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ptxcore.arch import get_architecture
from ptxcore.schema import StaticTarget
from ptxcore.triton.evidence import cache_kernels, static_evidence
from ptxcore.triton.loader import CANDIDATE_MODULE, load_candidate

from .conftest import compile_for_hopper

REPO = Path(__file__).resolve().parents[2]
SOL = REPO / "solutions" / "triton"
HOPPER = get_architecture("hopper")
ATTN_SIG = {"q_ptr": "*bf16", "k_ptr": "*bf16", "v_ptr": "*bf16", "o_ptr": "*bf16", "lse_ptr": "*fp32", "seq": "i32",
            "qk_scale": "fp32", "D": "constexpr", "BM": "constexpr", "BN": "constexpr", "IS_CAUSAL": "constexpr",
            "MASK_TAIL": "constexpr"}

# (file, kernel, signature, constexprs (as run() passes them at the paper shape), launch options)
KERNELS = [
    ("gemm_n7168_k5120/tma_persistent.py", "gemm_nt_tma_persistent",
     {"a_ptr": "*bf16", "b_ptr": "*bf16", "c_ptr": "*bf16", "M": "i32", "N": "i32", "K": "i32", "BM": "constexpr",
      "BN": "constexpr", "BK": "constexpr", "GROUP": "constexpr", "NUM_SMS": "constexpr"},
     {"BM": 128, "BN": 256, "BK": 64, "GROUP": 8, "NUM_SMS": 132}, {"num_warps": 8, "num_stages": 3}),
    ("gemm_n7168_k5120/tma_tiled.py", "gemm_nt_tma_tiled",
     {"a_desc": "tensordesc<bf16[128, 64]>", "b_desc": "tensordesc<bf16[256, 64]>",
      "c_desc": "tensordesc<bf16[128, 256]>", "M": "i32", "N": "i32", "K": "i32", "BM": "constexpr",
      "BN": "constexpr", "BK": "constexpr", "GROUP": "constexpr"},
     {"BM": 128, "BN": 256, "BK": 64, "GROUP": 8}, {"num_warps": 8, "num_stages": 3}),
    ("mha_with_lse_d128/fa_tma.py", "attn_fwd_lse", ATTN_SIG,
     {"D": 128, "BM": 128, "BN": 128, "IS_CAUSAL": False, "MASK_TAIL": False}, {"num_warps": 8, "num_stages": 3}),
    ("mha_with_lse_d128_causal/fa_tma.py", "attn_fwd_lse", ATTN_SIG,
     {"D": 128, "BM": 128, "BN": 128, "IS_CAUSAL": True, "MASK_TAIL": False}, {"num_warps": 8, "num_stages": 3}),
]


def test_every_solution_file_has_a_static_case():
    assert sorted(str(p.relative_to(SOL)) for p in SOL.glob("*/*.py")) == sorted(k[0] for k in KERNELS)


def test_causal_twin_differs_only_in_the_flag():
    base = (SOL / "mha_with_lse_d128" / "fa_tma.py").read_text().splitlines()
    twin = (SOL / "mha_with_lse_d128_causal" / "fa_tma.py").read_text().splitlines()
    diff = [(a, b) for a, b in zip(base, twin, strict=True) if a != b]
    assert diff == [("CAUSAL = False", "CAUSAL = True")]


@pytest.mark.slow
@pytest.mark.parametrize("rel,kernel,signature,constexprs,options", KERNELS, ids=[k[0] for k in KERNELS])
def test_solution_sass_holds_wgmma_and_tma(rel, kernel, signature, constexprs, options, tmp_path):
    pytest.importorskip("triton")
    cache = tmp_path / "triton-cache"
    load_candidate(SOL / rel, cache)  # as the child loads it: private module name, the candidate's builtins
    mod = sys.modules[CANDIDATE_MODULE]
    compiled = compile_for_hopper(getattr(mod, kernel), signature, constexprs, divisible=tuple(range(6)), **options)
    assert compiled.metadata.shared <= 232_448, "more shared memory than an H200 block may use"
    binaries = [b for b in cache_kernels(cache) if b.name == kernel]
    static = static_evidence(binaries, HOPPER)
    assert static.per_kernel == {kernel: StaticTarget.PRESENT}
    counts = static.report.counts
    assert counts.get("HGMMA", 0) > 0 and counts.get("UTMALDG", 0) > 0, counts
    print(f"\n{rel}:{kernel}: families {static.report.family_counts}, "
          f"HGMMA {counts.get('HGMMA')}, UTMALDG {counts.get('UTMALDG')}, UTMASTG {counts.get('UTMASTG', 0)}, "
          f"smem {compiled.metadata.shared} B")


@pytest.mark.slow
def test_solutions_compute_the_right_numbers_in_the_interpreter():
    pytest.importorskip("triton")
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": str(REPO)}
    out = subprocess.run([sys.executable, str(REPO / "tests" / "triton" / "interpret_solutions.py")],
                         capture_output=True, text=True, timeout=600, env=env)
    assert out.returncode == 0, out.stderr[-3000:]
    rows = [json.loads(line) for line in out.stdout.splitlines()]
    assert len(rows) == 10
    for row in rows:
        assert row["nan"] == 0 and row["mismatches"] == 0, row
