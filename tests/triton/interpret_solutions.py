"""Run our Triton solutions' kernels in Triton's CPU interpreter at small, ragged shapes; print JSON lines.

    TRITON_INTERPRET=1 python tests/triton/interpret_solutions.py

Each line: {"case", "max_abs", "mismatches", "elements", "nan"} with PTXBench's rule (abs > 1e-2 AND rel > 1e-2)
against an fp32 torch reference. Kernels are launched directly (their `run` needs a CUDA device).
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import interpreter_shim  # noqa: E402,F401 - must precede the kernel imports
import torch  # noqa: E402
import triton  # noqa: E402
from conftest import import_file  # noqa: E402

SOL = HERE.parents[1] / "solutions" / "triton"


def rule(out: torch.Tensor, ref: torch.Tensor) -> dict:
    d = (out.float() - ref).abs()
    bad = (d > 1e-2) & (d / ref.abs().clamp_min(1e-30) > 1e-2)
    return {"max_abs": d.max().item(), "mismatches": int(bad.sum()), "elements": ref.numel(),
            "nan": int(torch.isnan(out.float()).sum())}


def gemm_cases() -> list[dict]:
    out = []
    torch.manual_seed(0)
    M, N, K = 300, 512, 192  # M ragged against 128
    A = torch.randn(M, K).to(torch.bfloat16)
    B = torch.randn(N, K).to(torch.bfloat16)
    ref = A.float() @ B.float().T
    per = import_file(SOL / "gemm_n7168_k5120" / "tma_persistent.py", "sol_gemm_persistent")
    C = torch.full((M, N), float("nan")).to(torch.bfloat16)
    triton.set_allocator(per._descriptor_scratch)
    per.gemm_nt_tma_persistent[(3,)](A, B, C, M, N, K, BM=128, BN=256, BK=64, GROUP=8, NUM_SMS=3)
    out.append({"case": "gemm/tma_persistent", **rule(C, ref)})
    tiled = import_file(SOL / "gemm_n7168_k5120" / "tma_tiled.py", "sol_gemm_tiled")
    C = torch.full((M, N), float("nan")).to(torch.bfloat16)
    tiled.run(A, B, C)
    out.append({"case": "gemm/tma_tiled", **rule(C, ref)})
    return out


def attention_cases() -> list[dict]:
    out = []
    for problem, causal in (("mha_with_lse_d128", False), ("mha_with_lse_d128_causal", True)):
        mod = import_file(SOL / problem / "fa_tma.py", f"sol_{problem}")
        triton.set_allocator(mod._descriptor_scratch)
        for seq in (256, 200):
            torch.manual_seed(seq)
            B, H, D = 1, 2, 128
            Q, K, V = (torch.randn(B, H, seq, D).to(torch.bfloat16) for _ in range(3))
            Out = torch.full((B, H, seq, D), float("nan")).to(torch.bfloat16)
            L = torch.full((B, H, seq), float("nan"))
            grid = (triton.cdiv(seq, 128), B * H)
            mod.attn_fwd_lse[grid](Q, K, V, Out, L, seq, mod.LOG2E / math.sqrt(D), D=D, BM=128, BN=128,
                                   IS_CAUSAL=causal, MASK_TAIL=seq % 128 != 0)
            s = (Q.float() @ K.float().transpose(-1, -2)) / math.sqrt(D)
            if causal:
                s = s.masked_fill(~torch.ones(seq, seq, dtype=torch.bool).tril(), float("-inf"))
            lse = torch.logsumexp(s, -1)
            ref = torch.exp(s - lse[..., None]) @ V.float()
            out.append({"case": f"{problem}/O/S={seq}", **rule(Out, ref.to(torch.bfloat16).float())})
            out.append({"case": f"{problem}/LSE/S={seq}", **rule(L, lse)})
    return out


if __name__ == "__main__":
    for row in gemm_cases() + attention_cases():
        print(json.dumps(row), flush=True)
