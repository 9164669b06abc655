"""Run one Triton kernel.py under Nsight Compute: seeded inputs, `--calls` calls, the last inside the NVTX range.

    ncu ...flags of ptxcore.gpu.harness.ncu... --kernel-name regex:^(k)$ python tests/gpu/triton_profile_driver.py \
        --source kernel.py --problem NAME --cache DIR [--workload UUID] [--seed S] [--device N] [--calls 2]

What the judge's `profile` child does for a TVM-FFI library, with the Triton loader instead: the first call
compiles (and autotunes) outside the range; the private cache dir is fixed across ncu's application replays,
so every replay loads the same cubins.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--source", required=True)
    p.add_argument("--problem", required=True)
    p.add_argument("--cache", required=True)
    p.add_argument("--workload")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--device", type=int, default=0)
    p.add_argument("--calls", type=int, default=2)
    args = p.parse_args(argv)

    import torch

    from ptxcore.gpu.child.standalone import NVTX_RANGE
    from ptxcore.gpu.harness.workloads import allocate_outputs, call_args, generate_inputs, resolve_spec
    from ptxcore.problems import get_problem
    from ptxcore.triton.session import TritonSession

    problem = get_problem(args.problem)
    spec = resolve_spec(problem, problem.workload(args.workload))
    torch.cuda.set_device(args.device)
    values = {**generate_inputs(problem, spec, args.seed), **allocate_outputs(spec)}
    argv_ = call_args(spec, values)
    session = TritonSession(Path(args.source), Path(args.cache))
    torch.cuda.synchronize()
    for i in range(args.calls):
        if i == args.calls - 1:
            with torch.cuda.nvtx.range(NVTX_RANGE):
                session.call(argv_)
                torch.cuda.synchronize()
        else:
            session.call(argv_)
    torch.cuda.synchronize()
    print(f"triton driver: {args.calls} call(s), kernels {session.launch_report()['kernels']}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
