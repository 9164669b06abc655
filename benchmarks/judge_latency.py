"""Judge latency and throughput through a warm profiling service (issue 27): new candidates, stage by stage.

    python benchmarks/judge_latency.py --gpus 0                       # on the GPU host (real judge)
    python benchmarks/judge_latency.py --gpus 0 --latency 3 --stream 6 --out lat.json

Every candidate is NEW: the kernel (default: our GEMM solution) with a distinct trailing comment and unused
device variable, so its build, SASS dump, memcheck and Nsight Compute run are never cache hits. Arms (each a fresh service with its own cache
root, same kernel, same counts):

  sequential   the order before issue 27: memcheck between correctness and timing, ncu after timing, the
               worker builds the candidate it takes (--prebuild-workers 0, overlap_tools false)
  overlapped   memcheck and ncu side by side before timing (overlap_tools), queued candidates built by the
               service's prebuild threads while the GPU judges others
  prestarted   overlapped, with memcheck's and ncu's runs started before their candidate is known (tool,
               interpreter, imports; prestart_tools), one waiting run per tool (prestart_depth 1)
  prestarted-2 prestarted with two waiting runs per tool (prestart_depth 2): back-to-back candidates too
  waiting-child
               prestarted-2 with the candidate's session child started ahead too (prestart_child; its sandbox,
               interpreter, CUDA context and CUPTI, the library handed in before LOAD): the default judge

Per arm: the first candidate on the fresh service (cold: workload state and reference latency included), then
--latency candidates one at a time (wall from submit to verdict, as a client sees it), then --prebuilt
candidates whose build the benchmark made first into the arm's compile cache (the GPU host's critical path when
the CPU stage already built it), then --stream candidates submitted at once (kernels judged per GPU-minute).
Prints a stage table (medians over the one-at-a-time candidates) and the arms' ratios; checks that every arm gave
the same verdicts and the same executed-instruction counts (ncu beside memcheck must count what it counts
alone). Timing itself is unchanged: 10 warm-ups + 50 timed calls, 3 trials, alone on the GPU.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from service_bench_common import REPO, start, table, tmp_work_dir, write_json  # noqa: E402

from ptxcore.gpu.service.client import ProfilerClient  # noqa: E402

_EARLIER = {"prepare_tools": False, "defer_session_close": False}
"""What the arms of the judge before the default's prepared runs and deferred close (the fourth session of
2026-12-04) leave off."""
_WAITING = {"overlap_tools": True, "prestart_tools": True, "prestart_depth": 2, "prestart_child": True}
ARMS = {
    "sequential": ({**_EARLIER, "overlap_tools": False, "prestart_tools": False, "prestart_child": False},
                   ("--prebuild-workers", "0")),
    "overlapped": ({**_EARLIER, "overlap_tools": True, "prestart_tools": False, "prestart_child": False},
                   ("--prebuild-workers", "2")),
    "prestarted": ({**_EARLIER, "overlap_tools": True, "prestart_tools": True, "prestart_depth": 1,
                    "prestart_child": False},
                   ("--prebuild-workers", "2")),
    "prestarted-2": ({**_EARLIER, "overlap_tools": True, "prestart_tools": True, "prestart_depth": 2,
                      "prestart_child": False},
                     ("--prebuild-workers", "2")),
    "waiting-child": ({**_EARLIER, **_WAITING}, ("--prebuild-workers", "2")),
    "prepared-tools": ({**_WAITING, "prepare_tools": True, "defer_session_close": False}, ("--prebuild-workers", "2")),
    "deferred-close": ({**_WAITING, "prepare_tools": False, "defer_session_close": True}, ("--prebuild-workers", "2")),
    "prepared-deferred": ({**_WAITING, "prepare_tools": True, "defer_session_close": True},
                          ("--prebuild-workers", "2")),
    "fine-meter": ({**_WAITING, "prepare_tools": True, "defer_session_close": True, "meter_samples_per_call": 100},
                   ("--prebuild-workers", "2")),
}
"""Arms by name (--arms): JudgeConfig overrides and the service's extra arguments. `prestarted` is `overlapped`
with each candidate's memcheck and ncu runs started before it is known (JudgeConfig.prestart_tools,
ptxcore.gpu.harness.prestart), one waiting run per tool; `prestarted-2` keeps two (prestart_depth), for
back-to-back candidates; `waiting-child` also starts the session child ahead (JudgeConfig.prestart_child,
ptxcore.gpu.harness.waiting): the default judge until the fourth session of 2026-12-04. `prepared-tools` adds
memcheck and ncu runs that make their CUDA context and inputs while the candidate builds
(JudgeConfig.prepare_tools); `deferred-close` ends each session on a thread after its verdict, the next judgement
waiting for it after its build (JudgeConfig.defer_session_close, stage `close_wait`); `prepared-deferred` has
both: the default judge. `fine-meter` is the default judge with the meter's former default of 100 samples per
call, four times the default's 25 (JudgeConfig.meter_samples_per_call). Every arm configures the meter beside
the memcheck gate (pipeline.session), as the judge does."""
STAGES = ("build", "workload_and_reference", "correctness", "sanitizer", "memcheck", "ncu", "timing", "total")
CORRECTNESS_PARTS = ("meter_open", "child_start", "load")
"""The correctness stage's parts (ptxcore.gpu.pipeline.session): taking the device's sampler, the child's start
(or taking the waiting one), loading the module and mapping the buffers; `calls and checks` is the rest (the
correctness calls, their comparisons and the rules)."""
TIMING_PARTS = ("meter_start", "meter_stop", "gpu_monitor", "timing_calls", "timed_collect", "timed_fetch",
                "meter_audit")
"""The timing stage's parts (ptxcore.gpu.pipeline.session; ptxcore.gpu.harness.calls.HOST_STAGES): the meter's
start (settle) and stop (settle, stop, decode) per trial, the GPU monitor's snapshots, the host's loop around the
warm-up and timed calls, reading their comparisons and CUPTI records, and the audit; `rest` is the timing stage
minus these. The meter's configuration (`meter_configure`) runs beside the memcheck gate, shown with the
correctness parts."""
AROUND_PARTS = ("close_wait", "prepare", "tools_prepare", "slots", "session_close", "verdict")
"""Around the session (ptxcore.gpu.pipeline.judge, .session): the GPU context and the build's library list, the
trials' shared output buffers, ending the child and the meter, and assembling the verdict after the session;
`tools_prepare` is taking the tool runs and writing their preparation (JudgeConfig.prepare_tools), `close_wait`
the wait for the last session's close handed off after its verdict (JudgeConfig.defer_session_close); `rest` is
the total minus build, close_wait, workload_and_reference, prepare, tools_prepare, the session and the verdict."""
AROUND_INSIDE = ("build", "close_wait", "workload_and_reference", "prepare", "tools_prepare", "session", "verdict")
"""The stages a judgement's total is split into for the `rest` of the table around the session."""
CLOSE_PARTS = ("child_close", "meter_close", "slots_release")
"""Closing the session, by part (ptxcore.gpu.pipeline.session): ending the child (its exit request, its process
and sandbox), closing the device meter (CUPTI PM sampling disabled), releasing the trials' shared buffers."""
STOP_PARTS = ("meter_decode", "meter_evaluate")
"""The meter's stop, by part (ptxcore.gpu.harness.meter.MeterDecode): decoding the hardware buffer, evaluating
the samples' metrics; `other` is the stop minus these (settling, stopping)."""


def variants(source: str, arm: str, n: int) -> list[str]:
    """`n` new candidates: the same kernel with a distinct comment and a distinct unused device variable (a new
    source hash and new device code, so that no fatbinary of theirs was dumped before, ptxcore.compile.devicecode;
    the same instructions)."""
    nonce = uuid.uuid4().hex[:8]
    return [f"{source}\n// judge_latency {arm} {nonce} {i}\n__device__ int judge_latency_{nonce}_{i} = {i};\n"
            for i in range(n)]


def prebuild(sources: list[str], cache_root: Path) -> float:
    """Build `sources` into the arm's compile cache as the CPU stage would; seconds."""
    from ptxcore.arch import get_architecture
    from ptxcore.compile import BuildOptions, CompileCache, compile_candidate

    t0 = time.monotonic()
    cache = CompileCache(cache_root / "compile")
    for s in sources:
        compile_candidate(s, BuildOptions(get_architecture("hopper"), timeout_s=300.0), cache)
    return time.monotonic() - t0


def one(client: ProfilerClient, source: str, problem: str) -> dict:
    t0 = time.monotonic()
    status = client.wait(client.submit(source, problem), timeout_s=1800)
    wall = time.monotonic() - t0
    r = status.result
    return {"wall_s": wall, "status": r.status.value if r else status.state, "stages": dict(r.stage_seconds) if r else {},
            "target": r.target_instruction.status.value if r else None,
            "counts": dict(r.target_instruction.family_thread_inst_executed) if r and r.target_instruction.family_thread_inst_executed else {},
            "speedup": r.performance.speedup_factor if r and r.performance else None}


def run_arm(arm: str, source: str, problem: str, args: argparse.Namespace) -> dict:
    judge_config, extra = ARMS[arm]
    cache_root = tmp_work_dir(f"latency-cache-{arm}-")
    server = start(tmp_work_dir(f"latency-{arm}-"), args.gpus, False,
                   {"judge_config": {**judge_config, "cache_dir": str(cache_root)}}, extra=extra)
    n = 1 + args.latency + args.prebuilt + args.stream
    srcs = variants(source, arm, n)
    cold_src, lat, pre, stream = (srcs[0], srcs[1:1 + args.latency], srcs[1 + args.latency:1 + args.latency + args.prebuilt],
                                  srcs[1 + args.latency + args.prebuilt:])
    try:
        with ProfilerClient(server.url, timeout_s=3600) as client:
            print(f"# {arm}: cold", flush=True)
            cold = one(client, cold_src, problem)
            print(f"# {arm}: {len(lat)} new candidates one at a time", flush=True)
            latency = [one(client, s, problem) for s in lat]
            cpu_build_s = prebuild(pre, cache_root)
            print(f"# {arm}: {len(pre)} prebuilt ({cpu_build_s:.1f} s of CPU build first)", flush=True)
            prebuilt = [one(client, s, problem) for s in pre]
            print(f"# {arm}: a stream of {len(stream)}", flush=True)
            t0 = time.monotonic()
            ids = client.submit_batch([{"definition": problem, "source": s} for s in stream]) if stream else []
            done = [client.wait(i, timeout_s=3600) for i in ids]
            stream_wall = time.monotonic() - t0
    finally:
        server.stop()
    return {"arm": arm, "cold": cold, "latency": latency, "prebuilt": prebuilt, "cpu_build_s": cpu_build_s,
            "stream": {"n": len(stream), "wall_s": stream_wall,
                       "statuses": [d.result.status.value if d.result else d.state for d in done],
                       "per_gpu_minute": len(stream) / (stream_wall / 60.0) / len(args.gpus) if stream else None}}


def med(rows: list[dict], key: str) -> float | None:
    vals = [r["stages"].get(key) for r in rows if r["stages"].get(key) is not None]
    return statistics.median(vals) if vals else None


def _parts(results: list[dict], parts: tuple[str, ...], whole: str, inside: tuple[str, ...] | None = None
           ) -> list[list]:
    """Per arm: the median of each part of the new candidates and the rest, the `whole` stage minus `inside`
    (default: minus the parts); "-" where a stage was not recorded."""
    rows = []
    for a in results:
        values = [med(a["latency"], k) for k in parts]
        total = med(a["latency"], whole)
        taken = values if inside is None else [med(a["latency"], k) for k in inside]
        rest = total - sum(v or 0.0 for v in taken) if total is not None else None
        rows.append([a["arm"], *[v if v is not None else "-" for v in values], rest if rest is not None else "-"])
    return rows


def report(results: list[dict]) -> str:
    headers = ["arm", "cold s", "new s", "prebuilt s", *STAGES, "stream/GPU-min"]
    rows = []
    for a in results:
        new = a["latency"]
        rows.append([a["arm"], a["cold"]["wall_s"], statistics.median(r["wall_s"] for r in new) if new else "-",
                     statistics.median(r["wall_s"] for r in a["prebuilt"]) if a["prebuilt"] else "-",
                     *[(med(new, k) if med(new, k) is not None else "-") for k in STAGES],
                     a["stream"]["per_gpu_minute"] if a["stream"]["per_gpu_minute"] is not None else "-"])
    lines = [table(headers, rows), "", "correctness stage of the new candidates, by part (median s):"]
    split = [[*row, med(a["latency"], "meter_configure") or "-"]
             for a, row in zip(results, _parts(results, CORRECTNESS_PARTS, "correctness"), strict=True)]
    lines.append(table(["arm", *CORRECTNESS_PARTS, "calls and checks", "meter_configure (beside the gate)"], split))
    lines += ["", "timing stage of the new candidates, by part (median s):",
              table(["arm", *TIMING_PARTS, "rest"], _parts(results, TIMING_PARTS, "timing"))]
    around = [row for a, row in zip(results, _parts(results, AROUND_PARTS, "total", AROUND_INSIDE), strict=True)
              if any(med(a["latency"], k) is not None for k in AROUND_PARTS)]  # none before they were recorded
    if around:
        lines += ["", "around the session (median s):", table(["arm", *AROUND_PARTS, "rest"], around)]
    stops = []
    for a in results:
        stop, parts = med(a["latency"], "meter_stop"), [med(a["latency"], k) for k in STOP_PARTS]
        if stop is not None and all(v is not None for v in parts):
            stops.append([a["arm"], stop, *parts, stop - sum(parts)])
    if stops:
        lines += ["", "the meter's stop, by part (median s):", table(["arm", "meter_stop", *STOP_PARTS, "other"], stops)]
    closes = [[a["arm"], *[med(a["latency"], k) for k in ("session_close", *CLOSE_PARTS)]] for a in results
              if all(med(a["latency"], k) is not None for k in ("session_close", *CLOSE_PARTS))]
    if closes:
        lines += ["", "closing the session, by part (median s):", table(["arm", "session_close", *CLOSE_PARTS], closes)]
    names = list(dict.fromkeys(a["arm"] for a in results))  # an arm named twice (A B B A) pools its candidates
    walls = {name: [r["wall_s"] for a in results if a["arm"] == name for r in a["latency"]] for name in names}
    if len(names) == 2 and all(walls.values()):
        b, n = (statistics.median(walls[name]) for name in names)
        lines.append(f"new-candidate wall, {names[1]} / {names[0]}: {n / b:.3f} (medians of {len(walls[names[1]])} and "
                     f"{len(walls[names[0]])} candidates)")
    verdicts = {(a["arm"], r["status"], r["target"]) for a in results for r in [a["cold"], *a["latency"], *a["prebuilt"]]}
    counts = {tuple(sorted(r["counts"].items())) for a in results for r in [a["cold"], *a["latency"], *a["prebuilt"]]}
    lines.append(f"verdicts (arm, status, target): {sorted(verdicts)}")
    lines.append(f"executed-instruction counts identical across every candidate and arm: {len(counts) == 1}")
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gpus", default="0", type=lambda s: [int(g) for g in s.split(",")])
    ap.add_argument("--kernel", type=Path, default=REPO / "solutions" / "gemm_n7168_k5120" / "wgmma_tma_ws.cu")
    ap.add_argument("--problem", default=None, help="default: the kernel's folder name")
    ap.add_argument("--arms", default="overlapped,prestarted")
    ap.add_argument("--latency", type=int, default=2, help="new candidates judged one at a time")
    ap.add_argument("--prebuilt", type=int, default=1, help="new candidates built first, then judged")
    ap.add_argument("--stream", type=int, default=4, help="new candidates submitted at once")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    arms = args.arms.split(",")
    unknown = [a for a in arms if a not in ARMS]
    if unknown:
        ap.error(f"unknown arm {unknown[0]!r} (arms: {', '.join(ARMS)})")
    if not args.kernel.is_file():
        ap.error(f"no such kernel: {args.kernel}")
    source, problem = args.kernel.read_text(), args.problem or args.kernel.parent.name
    results = []
    for a in arms:  # each arm's table as soon as it ends (a run cut short keeps what it measured)
        results.append(run_arm(a, source, problem, args))
        print(report(results[-1:]), flush=True)
        write_json(args.out, {"kernel": str(args.kernel), "problem": problem, "gpus": args.gpus, "arms": results})
    print(report(results), flush=True)
    write_json(args.out, {"kernel": str(args.kernel), "problem": problem, "gpus": args.gpus, "arms": results})
    return 0


if __name__ == "__main__":
    sys.exit(main())
