"""The problem's cuDNN baseline under ncu: warm-up calls, then one call in the NVTX range `ptxbench_call`.

    python -m research.kernels.mha_bwd.cudnn_driver --problem mha_bwd_d128 [--workload UUID] [--seed S]
        [--device N] [--warmup 3]

The inputs are the judge's (ptxcore.gpu.harness.workloads: the definition's shapes and dtypes, Q K V dO from
the seed, O and L from the cuDNN forward), the call is the judge's baseline (ptxcore.gpu.harness.baselines:
for mha_bwd_* `aten._scaled_dot_product_cudnn_attention_backward`). The baseline's first call also runs one
cuDNN forward (for its RNG state); the warm-ups take it, so the range holds the backward alone.
"""

from __future__ import annotations

import argparse
import sys


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="cudnn_driver")
    ap.add_argument("--problem", required=True)
    ap.add_argument("--workload", default=None)
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--device", type=int, default=0)
    ap.add_argument("--warmup", type=int, default=3)
    args = ap.parse_args(argv)
    import torch

    from ptxcore.gpu.child.standalone import NVTX_RANGE
    from ptxcore.gpu.harness.baselines import get_baseline
    from ptxcore.gpu.harness.workloads import generate_inputs, resolve_spec
    from ptxcore.problems import get_problem

    problem = get_problem(args.problem)
    spec = resolve_spec(problem, problem.workload(args.workload))
    torch.cuda.set_device(args.device)
    inputs = generate_inputs(problem, spec, problem.extension.seed if args.seed is None else args.seed)
    baseline = get_baseline(problem)
    for _ in range(args.warmup):
        baseline(inputs)
    torch.cuda.synchronize()
    torch.cuda.nvtx.range_push(NVTX_RANGE)
    outputs = baseline(inputs)
    torch.cuda.synchronize()
    torch.cuda.nvtx.range_pop()
    shapes = ", ".join(f"{n} {tuple(t.shape)} {t.dtype}" for n, t in outputs.items())
    print(f"cudnn driver: {problem.name}: {args.warmup} warm-up call(s), 1 in {NVTX_RANGE}: {shapes}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
