"""On the GPU host: the dS rounding variants on the judge's own inputs, against its cuDNN references.

    python -m research.precision.bwd_h200 [--problem mha_bwd_d128_causal] [--rows 256]

Builds the judge's workload state (the same seeded trials and cuDNN references `ptxbench eval`
uses), recomputes dQ and dK rows [0, rows) of every head under each variant of
bwd_model (and float64), and counts PTXBench-rule mismatches against cuDNN. It answers,
before a kernel is judged: how far cuDNN itself is from float64 on these rows, which rounding scheme
cuDNN's errors follow (a scheme that rounds like cuDNN shows ~0 mismatches), and how many mismatches
the kernels' scheme should get (the first rows are where they occur; pass --rows 4096 to count all).
Diagnostic only: the verdict is `ptxbench eval`'s.
"""

from __future__ import annotations

import argparse

import torch

from .bwd_model import Heads, Variant, bf16, exact_first_rows, first_rows, rule_mismatch
from .bwd_study import kernel_variants


def judged_heads(problem_name: str, trials: int) -> list[tuple[Heads, dict[str, torch.Tensor]]]:
    """Per trial: the inputs as Heads ([B*H, S, D] float32 on the GPU) and the cuDNN dQ, dK [B*H, S, D]."""
    from ptxcore.gpu.harness.state import WorkloadState
    from ptxcore.problems import get_problem

    problem = get_problem(problem_name)
    state = WorkloadState.build(problem, None, trials)
    causal = problem.name.endswith("_causal")
    out = []
    for trial in state.trials:
        x = trial.inputs
        b, h, s, d = x["Q"].shape
        flat = {k: x[k].reshape(b * h, s, d).float() for k in ("Q", "K", "V", "dO", "O")}
        heads = Heads(
            flat["Q"], flat["K"], flat["V"], flat["dO"], flat["O"], x["L"].reshape(b * h, s).float(), causal
        )
        refs = {k: trial.references[k].reshape(b * h, s, d) for k in ("dQ", "dK")}
        out.append((heads, refs))
    return out


def _batch(h: Heads, lo: int, hi: int) -> Heads:
    return Heads(*(t[lo:hi] for t in (h.Q, h.K, h.V, h.dO, h.out, h.L)), causal=h.causal)


def count(variants: dict[str, Variant], trials, rows: int, batch: int) -> tuple[dict, dict, float]:
    """Mismatch counts vs cuDNN per variant (and float64's), their rows, and max |cuDNN - float64|."""
    counts = {name: 0 for name in [*variants, "float64"]}
    bad_rows: dict[str, set[int]] = {name: set() for name in counts}
    worst = 0.0
    for heads, refs in trials:
        for lo in range(0, heads.Q.shape[0], batch):
            h = _batch(heads, lo, lo + batch)
            ref = [refs[k][lo : lo + batch, :rows] for k in ("dQ", "dK")]
            exact = exact_first_rows(h, rows)
            worst = max(
                worst, *(float((r.double() - e).abs().max()) for r, e in zip(ref, exact, strict=True))
            )
            results = {name: first_rows(h, rows, v) for name, v in variants.items()}
            results["float64"] = tuple(bf16(e.float()) for e in exact)
            for name, got in results.items():
                for g, r in zip(got, ref, strict=True):
                    bad = rule_mismatch(g, r)
                    counts[name] += int(bad.sum())
                    bad_rows[name].update(bad.nonzero()[:, 1].tolist())
    return counts, bad_rows, worst


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--problem", default="mha_bwd_d128_causal")
    ap.add_argument("--rows", type=int, default=256, help="first rows of dQ and dK (multiple of 64)")
    ap.add_argument("--trials", type=int, default=3)
    ap.add_argument("--batch", type=int, default=16, help="heads per step")
    args = ap.parse_args(argv)
    torch.backends.cuda.matmul.allow_tf32 = False  # fp32 products, as the tensor cores accumulate them
    torch.set_float32_matmul_precision("highest")
    variants = {**kernel_variants(), "bf16(dS * scale)": Variant("bf16_scaled")}
    counts, bad_rows, worst = count(variants, judged_heads(args.problem, args.trials), args.rows, args.batch)
    print(f"{args.problem}: {args.trials} trials, dQ and dK rows 0..{args.rows - 1} of every head vs cuDNN")
    print(f"  max |cuDNN - float64| over those rows: {worst:.4g}")
    for name, c in counts.items():
        rows = sorted(bad_rows[name])
        print(
            f"  {name:24s} rule mismatches vs cuDNN: {c:5d}   rows: {rows[:24]}{' ...' if len(rows) > 24 else ''}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
