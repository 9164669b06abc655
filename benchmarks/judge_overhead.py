"""Judge overhead on a correct GEMM candidate: wall time split into build, sanitizer, correctness, timing,
ncu; harness overhead = (wall time without build and ncu) / (time the candidate's kernels ran). Goal <= 1.5.

    python benchmarks/judge_overhead.py [KERNEL.cu] [--problem gemm_n7168_k5120] [--cache-dir DIR] [--json OUT]

Needs a GPU. The first judgement starts cold (fresh cache: nvcc, memcheck, ncu, workload state and the
reference latency all run); a second judgement of the same kernel shows the warm (cached) path.
The one-time workload-state and reference-latency cost is reported separately and left out of the ratio.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

DEFAULT_KERNEL = REPO / "tests" / "fixtures" / "controls" / "02_gemm_tma.cu"
STAGES = ("build", "workload_and_reference", "correctness", "sanitizer", "timing", "ncu", "total", "kernel",
          "harness_prepare", "harness_call_roundtrip", "child_call_wall", "harness_compare_queue")


def overhead(stages: dict[str, float]) -> float:
    kernel = stages.get("kernel", 0.0)
    harness = stages.get("total", 0.0) - sum(stages.get(k, 0.0) for k in ("build", "ncu", "workload_and_reference"))
    return harness / kernel if kernel > 0 else float("inf")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("kernel", nargs="?", default=str(DEFAULT_KERNEL))
    ap.add_argument("--problem", default="gemm_n7168_k5120")
    ap.add_argument("--cache-dir", default=None)
    ap.add_argument("--json", default=None)
    args = ap.parse_args()

    from ptxcore.arch import get_architecture
    from ptxcore.gpu import JudgeConfig, gpu_available
    from ptxcore.gpu.pipeline.judge import GpuJudge
    from ptxcore.problems import get_problem

    if not gpu_available():
        print("no GPU is available on this machine: the overhead benchmark needs one", file=sys.stderr)
        return 3
    cache = Path(args.cache_dir) if args.cache_dir else Path(tempfile.mkdtemp(prefix="ptxbench-overhead-"))
    judge = GpuJudge(JudgeConfig(cache_dir=cache))
    source, problem, arch = Path(args.kernel).read_text(), get_problem(args.problem), get_architecture("hopper")
    rows = {}
    for label in ("cold", "warm"):
        r = judge.judge(source, problem, arch)
        st = dict(r.stage_seconds)
        rows[label] = {"status": r.status.value, "reason": r.reason, "stages_s": st, "overhead": overhead(st),
                       "latency_ms": r.performance.latency_ms if r.performance else None,
                       "reference_latency_ms": r.performance.reference_latency_ms if r.performance else None,
                       "target": r.target_instruction.status.value}
    print(f"kernel: {Path(args.kernel).name}  problem: {args.problem}")
    print(f"{'stage (s)':<24}" + "".join(f"{k:>12}" for k in rows))
    for s in STAGES:
        print(f"{s:<24}" + "".join(f"{rows[k]['stages_s'].get(s, 0.0):>12.3f}" for k in rows))
    for k, v in rows.items():
        print(f"{k}: {v['status']} latency {v['latency_ms']} ms, reference {v['reference_latency_ms']} ms, "
              f"target {v['target']}; harness overhead = (total - build - ncu - workload/reference) / kernel = "
              f"{v['overhead']:.3f} (goal <= 1.5)")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    return 0 if all(v["status"] == "PASSED" for v in rows.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
