"""/evaluate throughput of the profiling service with cached workload state vs without, on the same
candidate mix (issue 4; paper: 2.24x; goal >= 3x).

    python benchmarks/service_throughput.py --gpus 0                 # on the GPU host (real judge)
    python benchmarks/service_throughput.py --fake --gpus 0,1        # here: FakeRunner, plumbing only
    python benchmarks/service_throughput.py --gpus 0 --scale-gpus 0,1  # two-GPU host: also one vs two GPUs

Arms (each a fresh service, same tasks in the same order, all submitted at once through POST /batch):
  cached     each worker keeps workload state (inputs, reference outputs) and reference latencies
  no-cache   every task rebuilds the workload state and re-times the reference
With --scale-gpus a third arm runs the cached service on those GPUs (same tasks): the scaling ratio and
whether every verdict matches the one-GPU arm. A warm-up pass (one task per problem per GPU, not counted) precedes each arm. In real mode the compile cache
is primed first (nvcc is paid by neither arm) and, like FIBServe's /evaluate, the judge runs
correctness + timing only (--judge-config defaults to sanitizer and ncu off; pass '{}' for all stages).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from service_bench_common import (  # noqa: E402
    FAKE_BANNER,
    candidate_mix,
    mean,
    pct,
    prime_compile_cache,
    start,
    table,
    tmp_work_dir,
    write_json,
)

from ptxcore.gpu.service.client import ProfilerClient  # noqa: E402


def run_arm(name: str, cache_state: bool, mix, args, gpus: list[int]) -> dict:
    runner_args = ({"eval_s": args.fake_eval_s, "state_build_s": args.fake_state_build_s, "cache_state": cache_state}
                   if args.fake else {"cache_state": cache_state, "judge_config": json.loads(args.judge_config)})
    print(f"# arm {name} on GPUs {gpus} ...", flush=True)
    server = start(tmp_work_dir(f"throughput-{name}-"), gpus, args.fake, runner_args)
    try:
        with ProfilerClient(server.url, timeout_s=3600) as client:
            warm = [{"definition": p, "source": s} for p, s in {prob: src for prob, _, src in mix}.items()]
            t_warm = time.monotonic()
            client.poll_many(client.submit_batch(warm * len(gpus)), wait_s=1800)
            warm_s = time.monotonic() - t_warm
            tasks = [(prob, label, src) for _ in range(args.repeat) for prob, label, src in mix]
            t0 = time.monotonic()
            ids = client.submit_batch([{"definition": p, "source": s, "client_tag": lbl} for p, lbl, s in tasks])
            views = _wait_all(client, ids)
            wall = time.monotonic() - t0
    finally:
        server.stop()
    results = [v.result for v in views]
    state_key = "state" if args.fake else "workload_and_reference"
    print(f"#   {name}: {len(ids)} tasks in {wall:.1f} s (warm-up pass {warm_s:.1f} s)", flush=True)
    return {
        "arm": name, "gpu_list": gpus, "tasks": len(ids), "wall_s": wall, "tasks_per_s": len(ids) / wall,
        "warmup_s": warm_s,
        "service_s": [v.raw.get("service_s") or 0.0 for v in views],
        "latency_s": [(v.raw["finished_at"] or 0) - v.raw["created_at"] for v in views],
        "state_s": [r.stage_seconds.get(state_key, 0.0) if r else 0.0 for r in results],
        "verdicts": [(lbl, r.status.value if r else v.state) for (_, lbl, _), r, v in zip(tasks, results, views, strict=False)],
        "gpus": Counter(v.gpu for v in views),
    }


def _wait_all(client: ProfilerClient, ids: list[str]):
    views = {}
    while len(views) < len(ids):
        pending = [i for i in ids if i not in views]
        for v in client.poll_many(pending[:256], wait_s=30):
            if v.terminal:
                views[v.task_id] = v
    return [views[i] for i in ids]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gpus", default="0", help="GPU indices, e.g. 0 or 0,1")
    ap.add_argument("--scale-gpus", help="also run the cached arm on these GPUs, e.g. 0,1 (one vs two GPUs)")
    ap.add_argument("--fake", action="store_true", help="FakeRunner instead of the judge (no GPU numbers)")
    ap.add_argument("--candidates", nargs="*", help=".cu files: FILE (problem = parent folder) or FILE@problem")
    ap.add_argument("--per-problem", type=int, default=1, help="kernels per primary problem from solutions/")
    ap.add_argument("--repeat", type=int, default=3, help="times the mix is submitted per arm")
    ap.add_argument("--judge-config", default='{"sanitizer": false, "ncu": false}')
    ap.add_argument("--fake-eval-s", type=float, default=0.10)
    ap.add_argument("--fake-state-build-s", type=float, default=0.30)
    ap.add_argument("--out", help="write the measurements as JSON here")
    args = ap.parse_args()
    args.gpus = [int(g) for g in args.gpus.split(",")]
    scale = [int(g) for g in args.scale_gpus.split(",")] if args.scale_gpus else None
    mix = candidate_mix(args.candidates, args.per_problem)
    banner = FAKE_BANNER if args.fake else f"REAL judge; judge config {args.judge_config}"
    print(f"# /evaluate throughput, cached workload state vs none — {banner}", flush=True)
    print(f"# GPUs {args.gpus}; mix of {len(mix)} candidates x {args.repeat}: {', '.join(lbl for _, lbl, _ in mix)}")
    if not args.fake:
        print(f"# compile cache primed in {prime_compile_cache(mix):.1f} s", flush=True)
    plan = [("cached", True, args.gpus), ("no-cache", False, args.gpus)]
    if scale:
        plan.append((f"cached-{len(scale)}gpu", True, scale))
    arms: list[dict] = []
    for name, cache_state, gpus in plan:  # each arm's numbers are kept as soon as it ends
        arms.append(run_arm(name, cache_state, mix, args, gpus))
        write_json(args.out, {"fake": args.fake, "gpus": args.gpus, "judge_config": args.judge_config,
                              "arms": arms})
    rows = [[a["arm"], ",".join(map(str, a["gpu_list"])), a["tasks"], a["wall_s"], a["tasks_per_s"],
             mean(a["service_s"]), mean(a["state_s"]), pct(a["latency_s"], 0.5), pct(a["latency_s"], 0.95),
             dict(a["gpus"])] for a in arms]
    print(table(["arm", "GPUs", "tasks", "wall_s", "tasks/s", "mean service_s", "mean state+ref_s",
                 "p50 latency_s", "p95 latency_s", "tasks per GPU"], rows))
    ratio = arms[0]["tasks_per_s"] / arms[1]["tasks_per_s"]
    print(f"throughput ratio cached / no-cache: {ratio:.2f}x   (paper 2.24x; goal >= 3x)")
    print(f"cached arm verdicts: {dict(Counter(v for _, v in arms[0]['verdicts']))}")
    for other in arms[1:]:
        same = sum(a == b for a, b in zip(arms[0]["verdicts"], other["verdicts"], strict=True))
        print(f"verdicts identical, cached vs {other['arm']}: {same}/{len(arms[0]['verdicts'])}")
    summary = {"ratio": ratio}
    if scale:
        summary["scaling"] = arms[2]["tasks_per_s"] / arms[0]["tasks_per_s"]
        print(f"scaling {len(scale)} GPUs / {len(args.gpus)} GPU(s), cached: {summary['scaling']:.2f}x "
              f"(ideal {len(scale) / len(args.gpus):.0f}x); tasks per GPU {dict(arms[2]['gpus'])}")
    write_json(args.out, {"fake": args.fake, "gpus": args.gpus, "judge_config": args.judge_config,
                          **summary, "arms": arms})
    return 0


if __name__ == "__main__":
    sys.exit(main())
