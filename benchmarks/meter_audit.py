"""The judge's device meter on the solution library (GPU): honest claims against metered busy time, the speedups
with and without the meter side by side, and what the meter costs the judgement.

    python benchmarks/meter_audit.py [--json OUT] [--pairs 1] [KERNEL.cu@PROBLEM ...]

One warm GpuJudge (sanitizer and ncu off: this measures timing, not the other gates) judges each kernel in the
order A B B A ... per pair (A: the device meter on, the default; B: off, the audit then says "disabled"), so drift
falls on both arms alike. Default kernels: the best CUDA kernel of each MHA and GEMM problem in
solutions/README.md (the GQA problems need FlashInfer and are not in the default list). Prints, per kernel: the
speedup of each arm (median over its runs), their ratio, the honest ratio claimed / metered busy (lowest trial),
the tensor-pipe share of the metered busy time, and the timing stage's seconds per arm; then the baselines' own
audits (the trusted library's claim against the meter). Needs a GPU.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ptxcore.gpu.pipeline.judge import GpuJudge

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

DEFAULT = [
    "solutions/gemm_n7168_k5120/wgmma_tma_ws.cu@gemm_n7168_k5120",
    "solutions/gemm_n7168_k5120/cuda_core.cu@gemm_n7168_k5120",
    *[f"solutions/mha_with_lse_{v}/fa3_wgmma_tma.cu@mha_with_lse_{v}"
      for v in ("d128", "d128_causal", "d64", "d64_causal", "d96", "d96_causal")],
    *[f"solutions/mha_bwd_{v}/wgmma_tma_ws.cu@mha_bwd_{v}"
      for v in ("d128", "d128_causal", "d64", "d64_causal", "d96", "d96_causal")],
]


def _row(result, arm: str) -> dict:
    audit = result.timing_audit
    trials = audit.trials if audit is not None else []
    ratios = [t.claimed_median_ms / t.busy_median_ms for t in trials if t.busy_median_ms]
    shares = [t.tensor_active_share for t in trials if t.tensor_active_share is not None]
    perf = result.performance
    return {"arm": arm, "status": result.status.value, "reason": result.reason[:200],
            "speedup": perf.speedup_factor if perf else None, "latency_ms": perf.latency_ms if perf else None,
            "claim_over_busy_min": min(ratios) if ratios else None,
            "tensor_share": statistics.fmean(shares) if shares else None,
            "timing_s": result.stage_seconds.get("timing"), "meter_s": result.stage_seconds.get("meter_audit", 0.0)
            + result.stage_seconds.get("meter_configure", 0.0), "total_s": result.stage_seconds.get("total"),
            "audit": audit.model_dump(mode="json") if audit is not None else None}


def _fmt(v: float | None, spec: str) -> str:
    return "-" if v is None else format(v, spec)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("kernels", nargs="*", default=DEFAULT)
    ap.add_argument("--pairs", type=int, default=1)
    ap.add_argument("--json", default=None)
    args = ap.parse_args()

    from ptxcore.arch import get_architecture
    from ptxcore.gpu import JudgeConfig, gpu_available
    from ptxcore.gpu.pipeline.judge import GpuJudge
    from ptxcore.problems import get_problem

    if not gpu_available():
        print("meter audit benchmark: no GPU is available on this machine", file=sys.stderr)
        return 3
    judge = GpuJudge(JudgeConfig(sanitizer=False, ncu=False))
    hopper, rows = get_architecture("hopper"), []
    meter = judge.gpu().meter
    if meter is None:
        print(f"no device meter: {judge.gpu().meter_error}", file=sys.stderr)
        return 1
    for spec in args.kernels:
        path, _, problem = spec.rpartition("@")
        source, prob = (REPO / path).read_text(), get_problem(problem)
        for i in range(args.pairs):
            for on in ((True, False) if i % 2 == 0 else (False, True)):
                judge.gpu().meter = meter if on else None
                t0 = time.monotonic()
                lang = "triton" if path.endswith(".py") else "cuda"
                row = _row(judge.judge(source, prob, hopper, language=lang), "meter" if on else "no-meter")
                row.update(kernel=path, problem=problem, wall_s=time.monotonic() - t0)
                rows.append(row)
                print(f"  {problem:24s} {Path(path).name:18s} {row['arm']:9s} {row['status']:12s} "
                      f"x{_fmt(row['speedup'], '.4f')} claim/busy {_fmt(row['claim_over_busy_min'], '.3f')} "
                      f"{row['reason'][:80]}", flush=True)
    judge.gpu().meter = meter
    _table(rows)
    _baselines(judge)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    return 0


def _table(rows: list[dict]) -> None:
    print("\n| problem | kernel | verdict (meter) | speedup meter | speedup no meter | ratio | claim/busy (min) "
          "| tensor share | timing s meter | timing s no meter | meter s |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    keys = sorted({(r["problem"], r["kernel"]) for r in rows}, key=lambda k: (k[0], k[1]))
    for problem, kernel in keys:
        on = [r for r in rows if (r["problem"], r["kernel"]) == (problem, kernel) and r["arm"] == "meter"]
        off = [r for r in rows if (r["problem"], r["kernel"]) == (problem, kernel) and r["arm"] == "no-meter"]
        s_on = _median([r["speedup"] for r in on])
        s_off = _median([r["speedup"] for r in off])
        ratio = s_on / s_off if s_on and s_off else None
        print(f"| {problem} | {Path(kernel).name} | {on[0]['status'] if on else '-'} | {_fmt(s_on, '.4f')} | "
              f"{_fmt(s_off, '.4f')} | {_fmt(ratio, '.4f')} | {_fmt(_min([r['claim_over_busy_min'] for r in on]), '.3f')} "
              f"| {_fmt(_median([r['tensor_share'] for r in on]), '.3f')} | "
              f"{_fmt(_median([r['timing_s'] for r in on]), '.2f')} | {_fmt(_median([r['timing_s'] for r in off]), '.2f')} "
              f"| {_fmt(_median([r['meter_s'] for r in on]), '.2f')} |")


def _baselines(judge: GpuJudge) -> None:
    print("\n| baseline (trusted) audit | trial | claimed ms | busy ms | claim/busy | tensor share |")
    print("|---|---|---|---|---|---|")
    from ptxcore.gpu.harness.store import read_verified

    for entry in sorted(Path(judge.ref_cache.root).glob("*.json")):
        value = read_verified(entry) or {}
        audit = value.get("timing_audit") or {}
        for t in audit.get("trials", []):
            busy = t.get("busy_median_ms")
            print(f"| {value.get('problem')} | {t['trial']} | {t['claimed_median_ms']:.4f} | {_fmt(busy, '.4f')} | "
                  f"{_fmt(t['claimed_median_ms'] / busy if busy else None, '.3f')} | "
                  f"{_fmt(t.get('tensor_active_share'), '.3f')} |")


def _median(values: list) -> float | None:
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def _min(values: list) -> float | None:
    values = [v for v in values if v is not None]
    return min(values) if values else None


if __name__ == "__main__":
    sys.exit(main())
