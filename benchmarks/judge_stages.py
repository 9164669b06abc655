"""Judge stage times of one candidate, as a campaign turn and as `ptxbench eval` see them, on a fresh cache.

    python benchmarks/judge_stages.py [KERNEL.cu] [--problem gemm_n7168_k5120] [--json OUT]

Two arms, each on its own empty cache directory (nothing shared between them):
  * campaign: the CPU compile stage (as the campaign's compile task runs it), then the GPU judge;
  * eval:     the GPU judge alone (what `ptxbench eval` does on a GPU host).
Prints one table of wall seconds per stage (nvcc runs counted from the judge's and the compile stage's
records). Needs a GPU.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ptxcore.arch import Architecture
    from ptxcore.compile import CompiledCandidate
    from ptxcore.gpu.config import JudgeConfig
    from ptxcore.problems import Problem
    from ptxcore.schema import JudgeResult

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

DEFAULT_KERNEL = REPO / "solutions" / "gemm_n7168_k5120" / "wgmma_tma_ws.cu"
COLUMNS = ("cpu_compile", "build", "workload_and_reference", "sanitizer", "correctness", "timing", "ncu", "total")


def _judge(source: str, problem: Problem, arch: Architecture, config: JudgeConfig,
           compiled: CompiledCandidate) -> JudgeResult:
    """The judge's verdict through its current API, else the one before the judging seam (no build)."""
    from ptxcore.gpu import judge_candidate

    try:
        return judge_candidate(source, problem, arch, config, compiled=compiled)
    except TypeError:  # the judge before the judging seam took no build
        return judge_candidate(source, problem, arch, config)


def run_arm(arm: str, source: str, problem_name: str) -> dict:
    from ptxcore.arch import get_architecture
    from ptxcore.compile import BuildOptions, CompileCache, compile_candidate
    from ptxcore.gpu import JudgeConfig
    from ptxcore.problems import get_problem

    problem, arch = get_problem(problem_name), get_architecture("hopper")
    cache = Path(tempfile.mkdtemp(prefix=f"ptxbench-stages-{arch.key}-{arm}-"))
    config = JudgeConfig(cache_dir=cache)
    row: dict = {"arm": arm, "nvcc_runs": 0}
    started = time.monotonic()
    compiled = None
    if arm == "campaign":  # the campaign's compile task, then its judge task with that build
        t0 = time.monotonic()
        compiled = compile_candidate(source, BuildOptions(arch, timeout_s=config.build_timeout_s),
                                     CompileCache(cache / "compile"))
        row["cpu_compile"] = time.monotonic() - t0
        row["nvcc_runs"] += 0 if compiled.result.cache_hit else 1
    result = _judge(source, problem, arch, config, compiled)
    row["wall"] = time.monotonic() - started
    stages = dict(result.stage_seconds)
    for k in COLUMNS[1:]:
        row[k] = stages.get(k)
    build_hit = result.compile.cache_hit if result.compile is not None else True
    if compiled is not None and result.compile is not None and result.compile == compiled.result:
        build_hit = True  # the judge took the CPU stage's build as it was (verified, no nvcc)
    row["nvcc_runs"] += 0 if build_hit else 1
    row["status"] = result.status.value
    row["target"] = result.target_instruction.status.value
    row["latency_ms"] = result.performance.latency_ms if result.performance else None
    row["speedup"] = result.performance.speedup_factor if result.performance else None
    return row


def kernel_parser() -> argparse.ArgumentParser:
    """KERNEL.cu, --problem and --json: what the judge benchmarks share."""
    ap = argparse.ArgumentParser()
    ap.add_argument("kernel", nargs="?", default=str(DEFAULT_KERNEL))
    ap.add_argument("--problem", default="gemm_n7168_k5120")
    ap.add_argument("--json", default=None)
    return ap


def no_gpu(what: str) -> bool:
    """True (after saying so) when this machine has no GPU for `what`."""
    from ptxcore.gpu import gpu_available

    if gpu_available():
        return False
    print(f"no GPU is available on this machine: the {what} needs one", file=sys.stderr)
    return True


def main() -> int:
    args = kernel_parser().parse_args()
    if no_gpu("stage benchmark"):
        return 3
    source = Path(args.kernel).read_text()
    rows = [run_arm(arm, source, args.problem) for arm in ("campaign", "eval")]
    print(f"kernel: {Path(args.kernel).name}  problem: {args.problem}  (seconds)")
    head = ("arm", "nvcc_runs", *COLUMNS, "wall", "status", "target", "latency_ms", "speedup")
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for r in rows:
        cells = [f"{r.get(k):.3f}" if isinstance(r.get(k), float) else str(r.get(k, "-")) for k in head]
        print("| " + " | ".join(cells) + " |")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
