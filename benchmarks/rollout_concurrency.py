"""Rollout throughput vs concurrency: N agent trajectories share the profiling service; each turn is a
simulated LLM call (a sleep) followed by one /evaluate. Sweeps N (default 4 -> 48) and compares the
measured turns/s with the bound min(LLM-bound, GPU-bound) (issue 4; goal: within 90% at 48):

  LLM-bound = N / (L + S)   each trajectory alternates one LLM call (mean L) and one evaluation (S)
  GPU-bound = G / S         G GPUs, each busy S seconds per evaluation
  S = mean per-task worker time measured in the same run (TaskView.service_s), L = mean LLM latency drawn

    python benchmarks/rollout_concurrency.py --gpus 0                # GPU host, real judge
    python benchmarks/rollout_concurrency.py --fake --gpus 0,1       # here: FakeRunner, plumbing only

Each point runs for --window-s seconds: turns completed between --warmup-s and the end of the window
are counted (every trajectory is still active then; turns in flight at the end finish uncounted). One service serves the whole sweep (workload state warm).
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from service_bench_common import (  # noqa: E402
    FAKE_BANNER,
    candidate_mix,
    mean,
    prime_compile_cache,
    start,
    table,
    tmp_work_dir,
    write_json,
)

from ptxcore.gpu.service.client import ProfilerClient  # noqa: E402


def trajectory(idx: int, url: str, mix, args, t_end: float, out: list, lock: threading.Lock) -> None:
    rng = random.Random(args.seed * 1000 + idx)
    client = ProfilerClient(url, timeout_s=3600, poll_wait_s=30)
    turn = 0
    try:
        while True:
            if time.monotonic() >= t_end:
                return
            llm = rng.lognormvariate(0.0, args.llm_sigma) * args.llm_latency_s / _lognormal_mean(args.llm_sigma)
            time.sleep(llm)
            prob, label, src = mix[(idx + turn) % len(mix)]
            task_id = client.submit(src, prob, client_tag=f"traj{idx}/turn{turn}")
            view = client.wait(task_id)
            with lock:
                out.append({"done": time.monotonic(), "llm_s": llm, "service_s": view.raw.get("service_s") or 0.0,
                            "queue_s": view.raw.get("queue_s") or 0.0,
                            "status": view.result.status.value if view.result else view.state, "gpu": view.gpu})
            turn += 1
    finally:
        client.close()


def _lognormal_mean(sigma: float) -> float:
    import math

    return math.exp(sigma * sigma / 2)


def run_point(n: int, url: str, mix, args, gpus: int) -> dict:
    records: list = []
    lock = threading.Lock()
    t0 = time.monotonic()
    t_end = t0 + args.window_s
    threads = [threading.Thread(target=trajectory, args=(i, url, mix, args, t_end, records, lock)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    # Completions inside [t0 + warm-up, t_end], while every trajectory is still running: a stationary count.
    counted = [r for r in records if t0 + args.warmup_s <= r["done"] <= t_end]
    span = t_end - (t0 + args.warmup_s)
    s, llm = mean([r["service_s"] for r in records]), mean([r["llm_s"] for r in records])
    llm_bound, gpu_bound = n / (llm + s), gpus / s
    rate = len(counted) / span if counted else 0.0
    return {"n": n, "turns": len(records), "counted": len(counted), "turns_per_s": rate, "mean_llm_s": llm,
            "mean_service_s": s, "mean_queue_s": mean([r["queue_s"] for r in records]), "llm_bound": llm_bound,
            "gpu_bound": gpu_bound, "bound": min(llm_bound, gpu_bound),
            "of_bound": rate / min(llm_bound, gpu_bound) if records else 0.0}


def calibrate(url: str, mix, gpus: int) -> float:
    """Mean worker seconds per evaluation with warm state: one pass of the mix per GPU to build the
    workload states, then the same again, measured."""
    with ProfilerClient(url, timeout_s=3600) as client:
        for _ in range(2):
            ids = client.submit_batch([{"definition": p, "source": s} for p, _, s in mix] * gpus)
            views = client.poll_many(ids, wait_s=1800)
    return mean([v.raw.get("service_s") or 0.0 for v in views])


def sweep(url: str, mix, args, gpus: list[int]) -> list[dict]:
    """Calibrate S, fill in the defaults that depend on it, run every concurrency point."""
    s = calibrate(url, mix, len(gpus))
    if args.llm_latency_s is None:  # bounds cross near N = crossover
        args.llm_latency_s = 1.0 if args.fake else (args.crossover - 1) * s / len(gpus)
    cycle = args.llm_latency_s + s
    points_n = [int(x) for x in args.concurrency.split(",")]
    if not args.window_s:  # real: four cycles per point, shrunk to fit the time budget (a device call's 10 min)
        drain_s = sum(n * s / len(gpus) for n in points_n)  # worst case: every trajectory queued at the end
        args.window_s = 20.0 if args.fake else min(max(60.0, 4 * cycle),
                                                   (args.budget_s - drain_s) / len(points_n) - cycle)
        if args.window_s < 2.5 * cycle:
            print(f"# warning: window {args.window_s:.0f} s is short for cycles of {cycle:.0f} s; "
                  "use fewer --concurrency points or a larger --budget-s", flush=True)
    args.warmup_s = min(2 * cycle, args.window_s / 3) if args.warmup_s is None else args.warmup_s
    # after each window the turns still in flight finish (uncounted): up to N queued evaluations
    drain = sum(min(n, n * s / (args.llm_latency_s + s) + len(gpus)) * s / len(gpus) for n in points_n)
    minutes = (len(points_n) * (args.window_s + s + args.llm_latency_s) + drain) / 60
    print(f"# {len(points_n)} points x {args.window_s:.0f} s: about {minutes:.1f} min", flush=True)
    print(f"# GPUs {gpus}; S (calibrated) {s:.3f} s; LLM latency mean {args.llm_latency_s:.2f} s "
          f"(log-normal sigma {args.llm_sigma}); window {args.window_s:.0f} s, warm-up {args.warmup_s:.1f} s",
          flush=True)
    points = []
    for n in points_n:
        points.append(run_point(n, url, mix, args, len(gpus)))
        p = points[-1]
        print(f"  N={n}: {p['turns_per_s']:.3f} turns/s, bound {p['bound']:.3f} ({100 * p['of_bound']:.0f}%)",
              flush=True)
    return points


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gpus", default="0")
    ap.add_argument("--fake", action="store_true", help="FakeRunner instead of the judge (no GPU numbers)")
    ap.add_argument("--concurrency", default="4,8,16,32,48")
    ap.add_argument("--candidates", nargs="*")
    ap.add_argument("--per-problem", type=int, default=1)
    ap.add_argument("--llm-latency-s", type=float, default=None,
                    help="mean simulated LLM latency (default: fake 1.0 s; real: (crossover - 1) x S / G)")
    ap.add_argument("--crossover", type=int, default=8, help="real mode: N where LLM- and GPU-bound meet")
    ap.add_argument("--llm-sigma", type=float, default=0.5, help="log-normal spread of LLM latency")
    ap.add_argument("--window-s", type=float, default=None,
                    help="seconds per point (default: fake 20; real max(60, 4 x (L + S)) within --budget-s)")
    ap.add_argument("--warmup-s", type=float, default=None,
                    help="seconds not counted (default: min(2 x (L + S), window / 3))")
    ap.add_argument("--budget-s", type=float, default=480.0, help="real mode: seconds the sweep may take")
    ap.add_argument("--judge-config", default='{"sanitizer": false, "ncu": false}')
    ap.add_argument("--fake-eval-s", type=float, default=0.10)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out")
    args = ap.parse_args()
    gpus = [int(g) for g in args.gpus.split(",")]
    mix = candidate_mix(args.candidates, args.per_problem)
    print(f"# rollout throughput vs concurrency — {FAKE_BANNER if args.fake else 'REAL judge; ' + args.judge_config}",
          flush=True)
    if not args.fake:
        print(f"# compile cache primed in {prime_compile_cache(mix):.1f} s", flush=True)
    runner_args = ({"eval_s": args.fake_eval_s, "state_build_s": 0.3} if args.fake
                   else {"judge_config": json.loads(args.judge_config)})
    server = start(tmp_work_dir("rollout-"), gpus, args.fake, runner_args)
    try:
        points = sweep(server.url, mix, args, gpus)
    finally:
        server.stop()
    print(table(["N", "turns", "turns/s", "LLM-bound", "GPU-bound", "bound", "of bound", "mean S_s", "mean queue_s"],
                [[p["n"], p["counted"], p["turns_per_s"], p["llm_bound"], p["gpu_bound"], p["bound"],
                  f"{100 * p['of_bound']:.0f}%", p["mean_service_s"], p["mean_queue_s"]] for p in points]))
    lo, hi = min(points, key=lambda p: p["n"]), max(points, key=lambda p: p["n"])
    if len(points) > 1 and lo["turns_per_s"] > 0:
        print(f"throughput N={hi['n']} / N={lo['n']}: {hi['turns_per_s'] / lo['turns_per_s']:.2f}x "
              "(paper: 2.78x from 4 to 48)")
    write_json(args.out, {"fake": args.fake, "gpus": gpus, "llm_latency_s": args.llm_latency_s,
                          "window_s": args.window_s, "points": points})
    return 0


if __name__ == "__main__":
    sys.exit(main())
