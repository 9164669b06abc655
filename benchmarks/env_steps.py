"""Environment steps per second and step latency vs concurrent environments on one GPU (issue 29).

N environments (ptxcore.gym.KernelEnv) step concurrently through EnvPool's asyncio path; each step is the full
environment step: extraction, the CPU stage (compile cache), the profiling service's judgement on the GPU (submit
and long-poll through the service client), the fold, the feedback and the reward. The service runs in its own
process on --gpu, as in production. Each point steps for --window-s seconds after a --warmup-s warm-up; an episode
that ends is reset at once. Prints steps/s and p50/p95 step latency per N (default 1, 4, 16).

    python benchmarks/env_steps.py                        # GPU host: the real judge, profile standard
    python benchmarks/env_steps.py --profile quick        # 1 trial of 10 timed calls
    python benchmarks/env_steps.py --fresh                # every step a new kernel text (no verdict cache)
    python benchmarks/env_steps.py --fake --window-s 5    # here: FakeRunner, plumbing only (no GPU numbers)
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from service_bench_common import (  # noqa: E402
    FAKE_BANNER,
    candidate_mix,
    pct,
    prime_compile_cache,
    start,
    table,
    tmp_work_dir,
)

from ptxcore.gym import EnvBuilder, EnvSpec, get_profile  # noqa: E402
from ptxcore.gym.batch import EnvPool, StepFailure  # noqa: E402

DEFAULT_CANDIDATES = ["solutions/gemm_n7168_k5120/wgmma_tma_ws.cu",
                      "tests/fixtures/controls/05_gemm_wrong_layout.cu@gemm_n7168_k5120"]


def service_runner_args(profile) -> dict:
    """The service's JudgeRunner arguments that judge under `profile` (its JudgeConfig knobs)."""
    return {"judge_config": {"trials": profile.trials, "warmup": profile.warmup, "iters": profile.iters,
                             "call_timeout_s": profile.call_timeout_s}}


def answer(source: str, fresh: bool) -> str:
    tag = f"\n// step {uuid.uuid4().hex}\n" if fresh else "\n"
    return f"Here is the kernel.\n```cpp\n{source}{tag}```\n"


async def env_loop(pool: EnvPool, env, source: str, args, t_end: float, out: list) -> None:
    env.reset()
    while time.monotonic() < t_end:
        t0 = time.monotonic()
        outcome = await pool.astep(env, answer(source, args.fresh), args.step_timeout_s)
        done = time.monotonic()
        failed = isinstance(outcome, StepFailure)
        out.append({"done": done, "latency_s": done - t0,
                    "status": f"failed:{outcome.kind.value}" if failed else outcome.info.status.value})
        if failed or outcome.terminated or outcome.truncated:
            env.reset()


async def run_point(n: int, builder: EnvBuilder, mix, args) -> dict:
    envs = []
    for i in range(n):
        problem, _, source = mix[i % len(mix)]
        spec = EnvSpec(run_id="bench", problem=problem, profile=args.profile, policy_model="bench/fixed")
        envs.append((builder.make(spec), source))
    records: list = []
    t0 = time.monotonic()
    t_end = t0 + args.warmup_s + args.window_s
    with EnvPool(max_in_flight=n) as pool:
        await asyncio.gather(*(env_loop(pool, env, src, args, t_end, records) for env, src in envs))
    counted = [r for r in records if t0 + args.warmup_s <= r["done"] <= t_end]
    latencies = [r["latency_s"] for r in counted]
    statuses: dict[str, int] = {}
    for r in counted:
        statuses[r["status"]] = statuses.get(r["status"], 0) + 1
    return {"envs": n, "steps": len(counted), "steps_per_s": len(counted) / args.window_s,
            "p50_s": pct(latencies, 0.5), "p95_s": pct(latencies, 0.95), "statuses": statuses}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gpu", type=int, default=0, help="the one GPU the service judges on")
    ap.add_argument("--concurrency", default="1,4,16")
    ap.add_argument("--candidates", nargs="*", default=DEFAULT_CANDIDATES, help="FILE or FILE@problem")
    ap.add_argument("--profile", default="standard", choices=["quick", "standard", "thorough"])
    ap.add_argument("--fresh", action="store_true", help="a new kernel text every step (the judge's caches miss)")
    ap.add_argument("--window-s", type=float, default=60.0)
    ap.add_argument("--warmup-s", type=float, default=15.0)
    ap.add_argument("--step-timeout-s", type=float, default=None, help="default: the profile's")
    ap.add_argument("--fake", action="store_true", help="FakeRunner instead of the judge (no GPU numbers)")
    ap.add_argument("--out")
    args = ap.parse_args()
    profile = get_profile(args.profile)
    args.step_timeout_s = args.step_timeout_s or profile.step_timeout_s
    mix = candidate_mix(args.candidates, 1)
    print(f"# compile cache primed in {prime_compile_cache(mix):.1f} s", flush=True)
    runner_args = service_runner_args(profile)
    server = start(tmp_work_dir("env-steps-"), [args.gpu], args.fake, {} if args.fake else runner_args)
    if args.fake:
        print(f"# {FAKE_BANNER}")
    points = []
    try:
        builder = EnvBuilder(route=server.url)
        for n in [int(x) for x in args.concurrency.split(",")]:
            point = asyncio.run(run_point(n, builder, mix, args))
            points.append(point)
            print(f"# N={n}: {point['steps']} steps, {point['statuses']}", flush=True)
    finally:
        server.stop()
    print(f"\nEnvironment steps on GPU {args.gpu} (profile {args.profile}, {'fresh kernels' if args.fresh else 'repeated kernels'}"
          f", window {args.window_s:g} s)")
    print(table(["envs", "steps", "steps/s", "p50 s", "p95 s"],
                [[p["envs"], p["steps"], p["steps_per_s"], p["p50_s"], p["p95_s"]] for p in points]))
    if args.out:
        Path(args.out).write_text(json.dumps({"profile": args.profile, "fresh": args.fresh, "fake": args.fake,
                                              "points": points}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
