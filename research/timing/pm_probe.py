"""Probe (GPU host): can a process that runs no candidate code measure the GPU work another process does?

CUPTI's PM sampling reads device-wide hardware counters at a fixed GPU-time interval. This probe starts it in
this (trusted) process, runs a workload in a *child* process (torch matmuls with host gaps, its kernels traced
by CUPTI activity inside the child), and compares the busy time the samples show with the kernel spans the
child recorded: totals, per-kernel agreement after aligning the two time bases, and the sampling's cost on the
child's kernel durations (a run without sampling beside). Also the parent's %globaltimer against its own CUPTI
timestamp, so windows can be placed in the samples' time base.

    python -m research.timing.pm_probe [--interval-ns 10000] [--out DIR]

A research probe: it decides nothing; its numbers went into SECURITY.md's timing section.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import textwrap
import time
from pathlib import Path

CHILD = textwrap.dedent(r"""
    import json, sys, time
    import torch
    from cupti import cupti
    recs = []
    def req():
        return 8 << 20, 0
    def done(acts):
        for a in acts:
            if a.kind in (cupti.ActivityKind.CONCURRENT_KERNEL, cupti.ActivityKind.KERNEL):
                recs.append((str(a.name)[:40], int(a.start), int(a.end)))
    cupti.activity_register_callbacks(req, done)
    cupti.activity_enable(cupti.ActivityKind.CONCURRENT_KERNEL)
    n, gap_ms, size = int(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3])
    a = torch.randn(size, size, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(size, size, device="cuda", dtype=torch.bfloat16)
    for _ in range(3):
        a @ b
    torch.cuda.synchronize()
    print("READY", flush=True)
    sys.stdin.readline()
    t0 = cupti.get_timestamp()
    for i in range(n):
        (a @ b)
        torch.cuda.synchronize()
        time.sleep(gap_ms / 1e3)
    t1 = cupti.get_timestamp()
    print("END", flush=True)
    cupti.activity_flush_all(1)
    print(json.dumps({"t0": t0, "t1": t1, "kernels": [r for r in recs if t0 <= r[1] <= t1]}))
""")


def child_run(n: int, gap_ms: float, size: int, on_ready=None, on_done=None) -> dict:
    """Run the workload child; `on_ready` is called when it is about to start its timed loop, `on_done` after."""
    proc = subprocess.Popen([sys.executable, "-c", CHILD, str(n), str(gap_ms), str(size)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=os.environ.copy())
    line = proc.stdout.readline()
    if line.strip() != "READY":
        proc.kill()
        raise RuntimeError(f"child failed: {line} {proc.stderr.read()[-2000:]}")
    if on_ready is not None:
        on_ready()
    proc.stdin.write("GO\n")
    proc.stdin.flush()
    line = proc.stdout.readline()  # "END": the loop is over (before the child flushes and exits)
    if on_done is not None:
        on_done()
    proc.stdin.close()
    rest = proc.stdout.read()
    err = proc.stderr.read()
    proc.wait(timeout=120)
    if proc.returncode != 0:
        raise RuntimeError(f"child failed: {err[-2000:]}")
    return json.loads(rest.strip().splitlines()[-1])


def metric_catalog(chip: str) -> dict:
    from cupti import profiler_host as ph

    host = ph.ProfilerHost(chip, ph.ProfilerType.PM_SAMPLING)
    host.initialize()
    found = {}
    try:
        for mt in (ph.MetricType.COUNTER, ph.MetricType.RATIO, ph.MetricType.THROUGHPUT):
            names = host.get_base_metrics(mt)
            found[mt.name] = [m for m in names if any(w in m for w in ("cycles_active", "cycles_elapsed", "tensor",
                                                                         "gmma", "time", "pipe", "gr__"))][:120]
            found[mt.name + "_count"] = len(names)
    finally:
        host.deinitialize()
    return found


def choose_metrics(collector, chip: str) -> list[str]:
    tries = [
        ["gr__cycles_active.sum", "gr__cycles_elapsed.max", "sm__pipe_tensor_op_gmma_cycles_active.avg",
         "sm__cycles_active.avg"],
        ["gr__cycles_active.sum", "gr__cycles_elapsed.max", "sm__cycles_active.avg"],
        ["gr__cycles_active.sum", "gr__cycles_elapsed.max"],
        ["gr__cycles_elapsed.max", "sm__cycles_elapsed.sum"],
    ]
    errors = []
    for metrics in tries:
        try:
            collector.configure(metrics=metrics, sampling_interval=ARGS.interval_ns,
                                hardware_buffer_size=256 << 20)
            return metrics
        except Exception as exc:  # noqa: BLE001 - a probe: report and try the next set
            errors.append(f"{metrics}: {type(exc).__name__}: {exc}")
    raise RuntimeError("no metric set configured: " + " | ".join(errors))


def globaltimer_vs_cupti() -> dict:
    import cupy
    from cupti import cupti

    k = cupy.RawKernel(r'''extern "C" __global__ void gt(unsigned long long* o){
        unsigned long long t; asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)); o[0] = t; }''', "gt")
    buf = cupy.zeros(1, dtype=cupy.uint64)
    rows = []
    for _ in range(5):
        c0 = cupti.get_timestamp()
        k((1,), (1,), (buf,))
        cupy.cuda.runtime.deviceSynchronize()
        c1 = cupti.get_timestamp()
        rows.append((c0, int(buf.get()[0]), c1, time.time_ns()))
    return {"rows": rows, "gt_minus_cupti_ns": [r[1] - r[0] for r in rows],
            "cupti_minus_realtime_ns": [r[0] - r[3] for r in rows]}


def busy_in(samples: list[tuple[int, int, float]], lo: int, hi: int) -> float:
    """Busy ns inside [lo, hi]: each sample's busy time spread uniformly over its interval (samples sorted)."""
    import bisect

    starts = _STARTS.get(id(samples))
    if starts is None:
        starts = _STARTS[id(samples)] = [s for s, _, _ in samples]
    total = 0.0
    i = max(0, bisect.bisect_right(starts, lo) - 1)
    while i < len(samples) and samples[i][0] < hi:
        s, e, busy = samples[i]
        if e > lo and e > s:
            total += busy * (min(e, hi) - max(s, lo)) / (e - s)
        i += 1
    return total


_STARTS: dict[int, list[int]] = {}


def main() -> int:
    import torch
    from cupti import cupti, pm_sampling

    # cupti-python 13.3 with the image's libcupti 13.0: the 13.0 host-initialize struct is 48 bytes (13.3 added
    # a field); a larger structSize is refused with ERROR_INVALID_PARAMETER
    cupti.PROFILER_HOST_INITIALIZE_PARAMS_STRUCT_SIZE = int(os.environ.get("PROBE_HOST_INIT_SIZE", "48"))
    torch.cuda.init()
    torch.zeros(1, device="cuda")
    out = Path(ARGS.out)
    out.mkdir(parents=True, exist_ok=True)
    report: dict = {"versions": {"torch": torch.__version__, "cupti_python": getattr(cupti, "__version__", "?"),
                                 }}
    report["globaltimer"] = globaltimer_vs_cupti()
    baseline = child_run(ARGS.calls, ARGS.gap_ms, ARGS.size)  # no sampling: kernel durations for the cost
    col = pm_sampling.Collector(0)
    col.enable()
    chip = col._chip_name
    report["chip"] = chip
    try:
        report["catalog"] = metric_catalog(chip)
    except Exception as exc:  # noqa: BLE001
        report["catalog_error"] = repr(exc)
    try:
        metrics = choose_metrics(col, chip)
    except RuntimeError as exc:
        report["configure_error"] = str(exc)
        (out / "pm_probe.json").write_text(json.dumps(report, indent=1, default=str))
        print(json.dumps({k: report.get(k) for k in ("chip", "catalog", "catalog_error", "configure_error")},
                         indent=1, default=str)[:6000])
        return 1
    report["metrics"] = metrics
    stamps = {}

    def ready() -> None:
        col.start()
        stamps["p0"] = cupti.get_timestamp()

    def done() -> None:
        stamps["p1"] = cupti.get_timestamp()
        col.stop()

    sampled = child_run(ARGS.calls, ARGS.gap_ms, ARGS.size, ready, done)
    p0, p1 = stamps["p0"], stamps["p1"]
    t0 = time.perf_counter()
    data = col.decode(max_samples=ARGS.max_samples)
    decode_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    samples = []
    ia, ie = metrics.index("gr__cycles_active.sum") if "gr__cycles_active.sum" in metrics else None, 1
    for smp in data:
        vals = smp.metric_values
        frac = (vals[ia] / vals[ie]) if ia is not None and vals[ie] else 0.0
        samples.append((smp.start_timestamp, smp.end_timestamp, frac * (smp.end_timestamp - smp.start_timestamp),
                        vals))
    eval_s = time.perf_counter() - t0
    col.disable()
    kern = sampled["kernels"]
    kern_total = sum(e - s for _, s, e in kern)
    s3 = [(s, e, b) for s, e, b, _ in samples]
    busy_child_window = busy_in(s3, sampled["t0"], sampled["t1"])
    # per-kernel: best alignment offset between the child's CUPTI clock and the sample clock
    best = None
    for off in range(-200_000, 200_001, 2_000):
        err = sum(abs(busy_in(s3, s + off, e + off) - (e - s)) for _, s, e in kern[:20])
        if best is None or err < best[1]:
            best = (off, err)
    off = best[0]
    per = [(e - s, busy_in(s3, s + off, e + off)) for _, s, e in kern]
    report.update({
        "samples": len(samples), "decode_s": round(decode_s, 3), "evaluate_s": round(eval_s, 3),
        "parent_window_ns": p1 - p0,
        "sample_span": [samples[0][0], samples[-1][1]] if samples else None,
        "child_window": [sampled["t0"], sampled["t1"]],
        "kernels": len(kern), "kernel_total_ns": kern_total, "busy_in_child_window_ns": busy_child_window,
        "busy_over_kernel_total": busy_child_window / kern_total if kern_total else None,
        "best_offset_ns": off, "per_kernel_rel_err": [round(b / d - 1, 4) for d, b in per[:40]],
        "median_kernel_us_sampled": statistics.median(e - s for _, s, e in kern) / 1e3,
        "median_kernel_us_unsampled": statistics.median(e - s for _, s, e in baseline["kernels"]) / 1e3,
        "first_samples": [(s, e, round(b), v) for s, e, b, v in samples[:5]],
    })
    (out / "pm_probe.json").write_text(json.dumps(report, indent=1, default=str))
    keys = ("versions", "chip", "metrics", "samples", "decode_s", "evaluate_s", "kernels", "kernel_total_ns",
            "busy_in_child_window_ns", "busy_over_kernel_total", "best_offset_ns", "median_kernel_us_sampled",
            "median_kernel_us_unsampled", "sample_span", "child_window")
    for k in keys:
        print(f"{k}: {report.get(k)}")
    for kind, names in (report.get("catalog") or {}).items():
        print(f"catalog {kind}: {names if isinstance(names, int) else ' '.join(names)[:1500]}")
    print("catalog_error:", report.get("catalog_error"))
    print("per_kernel_rel_err:", report["per_kernel_rel_err"][:20])
    print("globaltimer - cupti (ns):", report["globaltimer"]["gt_minus_cupti_ns"])
    print("cupti - realtime (ns):", report["globaltimer"]["cupti_minus_realtime_ns"])
    return 0


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("--interval-ns", type=int, default=10000)
    p.add_argument("--calls", type=int, default=40)
    p.add_argument("--gap-ms", type=float, default=2.0)
    p.add_argument("--size", type=int, default=4096)
    p.add_argument("--max-samples", type=int, default=20000)
    p.add_argument("--out", default=os.environ.get("OUT", "/tmp/pm-probe"))
    ARGS = p.parse_args()
    sys.exit(main())
