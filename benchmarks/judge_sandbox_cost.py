"""What the candidate sandbox costs on the judge's wall (GPU): one kernel judged with and without it, side by side.

    python benchmarks/judge_sandbox_cost.py [KERNEL.cu] [--problem gemm_n7168_k5120] [--pairs 2] [--json OUT]

Each run is `ptxbench eval`'s path (the GPU judge alone) on its own empty cache directory, so every run pays
the same build, reference, memcheck and ncu work. Runs alternate A B B A ... (A: sandboxed, the default;
B: PTXBENCH_UNSANDBOXED=1, the development opt-out) so that clock or thermal drift falls on both arms alike,
after --warmup sandboxed runs that are not counted (the process's first judgement pays one-time costs: imports,
CUDA start-up, the driver's caches).
Prints every run's stage seconds, then the median wall and total of each arm and their ratio. Needs a GPU.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

from judge_stages import COLUMNS, kernel_parser, no_gpu, run_arm  # noqa: E402

OPT_OUT = "PTXBENCH_UNSANDBOXED"


def one_run(sandboxed: bool, source: str, problem: str) -> dict:
    saved = os.environ.pop(OPT_OUT, None)
    try:
        if not sandboxed:
            os.environ[OPT_OUT] = "1"
        row = run_arm("eval", source, problem)
    finally:
        os.environ.pop(OPT_OUT, None)
        if saved is not None:
            os.environ[OPT_OUT] = saved
    row["arm"] = "sandboxed" if sandboxed else "unsandboxed"
    return row


def order(pairs: int) -> list[bool]:
    """A B B A A B B A ...: True = sandboxed."""
    out: list[bool] = []
    for i in range(pairs):
        out += [True, False] if i % 2 == 0 else [False, True]
    return out


def main() -> int:
    ap = kernel_parser()
    ap.add_argument("--pairs", type=int, default=2)
    ap.add_argument("--warmup", type=int, default=1, help="uncounted runs first (default 1)")
    args = ap.parse_args()
    if no_gpu("sandbox cost benchmark"):
        return 3
    source = Path(args.kernel).read_text()
    for _ in range(args.warmup):
        w = one_run(True, source, args.problem)
        print(f"  warm-up      wall {w['wall']:.2f} s  {w['status']} (not counted)", flush=True)
    rows = []
    for sandboxed in order(args.pairs):
        rows.append(one_run(sandboxed, source, args.problem))
        print(f"  {rows[-1]['arm']:<12} wall {rows[-1]['wall']:.2f} s  {rows[-1]['status']}", flush=True)
    head = ("arm", *COLUMNS[1:], "wall", "status", "target", "latency_ms")
    print(f"kernel: {Path(args.kernel).name}  problem: {args.problem}  (seconds)")
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for r in rows:
        cells = [f"{r.get(k):.3f}" if isinstance(r.get(k), float) else str(r.get(k, "-")) for k in head]
        print("| " + " | ".join(cells) + " |")
    summary = {}
    for arm in ("sandboxed", "unsandboxed"):
        mine = [r for r in rows if r["arm"] == arm]
        summary[arm] = {k: statistics.median(r[k] for r in mine if r.get(k) is not None) for k in ("wall", "total")}
    for k in ("wall", "total"):
        ratio = summary["sandboxed"][k] / summary["unsandboxed"][k]
        print(f"median {k}: sandboxed {summary['sandboxed'][k]:.2f} s, unsandboxed {summary['unsandboxed'][k]:.2f} s,"
              f" ratio {ratio:.3f} ({(ratio - 1) * 100:+.1f}%)")
    if args.json:
        Path(args.json).write_text(json.dumps({"runs": rows, "median": summary}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
