"""Diagnose an attention-backward mismatch: candidate vs cuDNN vs a float64 computation from the definition.

    python -m research.precision.diagnose_mha_bwd KERNEL.cu [--problem mha_bwd_d128_causal]

Runs the candidate in-process (diagnostic only, not a judgement), finds the elements where it and cuDNN
disagree under the PTXBench rule, recomputes the heads involved in float64 from Q, K, V, O, dO, L, and
prints the three values side by side plus each side's error against float64 over those heads.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch


def exact_head(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, o: torch.Tensor, do: torch.Tensor,
               lse: torch.Tensor, causal: bool) -> dict[str, torch.Tensor]:
    """dQ, dK, dV of one head in float64, by name ([S, D] tensors)."""
    import torch

    q, k, v, o, do = (t.double() for t in (q, k, v, o, do))
    scale = 1.0 / math.sqrt(q.shape[-1])
    s = (q @ k.T) * scale
    if causal:
        n = s.shape[0]
        s = s.masked_fill(torch.ones(n, n, dtype=torch.bool, device=s.device).triu(1), float("-inf"))
    p = torch.exp(s - lse.double()[:, None])
    dp = do @ v.T
    delta = (do * o).sum(-1, keepdim=True)
    ds = p * (dp - delta)
    return {"dQ": ds @ k * scale, "dK": ds.T @ q * scale, "dV": p.T @ do}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("kernel")
    ap.add_argument("--problem", default="mha_bwd_d128_causal")
    args = ap.parse_args()
    import torch
    import tvm_ffi

    from ptxcore.arch import get_architecture
    from ptxcore.compile import BuildOptions, compile_candidate
    from ptxcore.gpu.harness.state import WorkloadState
    from ptxcore.problems import get_problem

    problem = get_problem(args.problem)
    causal = problem.name.endswith("_causal")
    built = compile_candidate(Path(args.kernel).read_text(), BuildOptions(get_architecture("hopper")))
    run = tvm_ffi.load_module(str(built.artifact))["run"]
    trial = WorkloadState.build(problem, None, 1).trials[0]
    x = trial.inputs
    outs = {n: torch.full_like(trial.references[n], float("nan")) for n in ("dQ", "dK", "dV")}
    run(x["Q"], x["K"], x["V"], x["O"], x["dO"], x["L"], outs["dQ"], outs["dK"], outs["dV"])
    torch.cuda.synchronize()
    heads = set()
    for name in ("dQ", "dK", "dV"):
        c, r = outs[name].float(), trial.references[name].float()
        diff = (c - r).abs()
        bad = (diff > 1e-2) & (diff / r.abs().clamp_min(1e-30) > 1e-2)
        idx = bad.nonzero().tolist()
        print(f"{name}: {len(idx)} mismatches vs cuDNN; first: {idx[:12]}")
        heads.update((b, h) for b, h, _, _ in idx)
    for b, h in sorted(heads)[:4]:
        ex = exact_head(*(x[n][b, h] for n in ("Q", "K", "V", "O", "dO")), x["L"][b, h], causal)
        for name in ("dQ", "dK", "dV"):
            e = ex[name]
            c, r = outs[name][b, h].double(), trial.references[name][b, h].double()
            for label, val in (("candidate", c), ("cuDNN", r)):
                d = (val - e).abs()
                rule = ((d > 1e-2) & (d / e.abs().clamp_min(1e-30) > 1e-2)).sum().item()
                print(f"  head ({b},{h}) {name} {label:9s} vs float64: max abs {d.max().item():.3e}, "
                      f"PTXBench-rule mismatches {rule}")
            cc, rr = outs[name][b, h].float(), trial.references[name][b, h].float()
            diff = (cc - rr).abs()
            bad = ((diff > 1e-2) & (diff / rr.abs().clamp_min(1e-30) > 1e-2)).nonzero().tolist()
            for s_, d_ in bad[:6]:
                print(f"    [{s_},{d_}] candidate {cc[s_, d_].item():+.6f} cuDNN {rr[s_, d_].item():+.6f} "
                      f"float64 {e[s_, d_].item():+.6f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
