"""Probe (GPU host): does the judge's device meter cover trials of long calls?

On the H200 (2026-12-02) two honest library kernels of 6-11 ms a call were INFRA_ERROR because the PM-sampling
trace of their trial 0 had a hole as long as the timed range (or held one sample). This probe takes the judge's
own meter (`ptxcore.gpu.harness.meter.PmSamplingMeter`) the way a judgement does (configure once, then start and
stop around each trial of 10 + 50 calls in a child process) over calls of chosen lengths and kinds:

- `spin`: one kernel per call that spins on %globaltimer for the call's length (the SMs idle-busy, low power);
- `mma`: one bf16 torch matmul per call sized to the call's length (tensor pipe busy, high power);
- `split`: the `mma` call's work as 8 back-to-back matmuls (short kernels, same call length).

For each it prints the samples, the largest hole and where it sits in the trial, CUPTI's decode counts and the
meter's own `uncovered` ruling, one row per trial. First (unless --no-gmma) it lists PM sampling's tensor metrics
on the chip and tries metric sets with a GMMA-only tensor counter (GMMA_TRIES).

    python -m research.timing.meter_probe [--ms 1,6,10.5,20] [--kinds spin,mma,split] [--trials 3] [--out DIR]

A research probe: it decides nothing; what it shows goes into the meter's docstring and RESULTS.md.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

CHILD = textwrap.dedent(r"""
    import json, sys, time
    import cupy, torch
    from cupti import cupti
    kind, ms, calls = sys.argv[1], float(sys.argv[2]), int(sys.argv[3])
    spin = cupy.RawKernel(r'''extern "C" __global__ void spin(unsigned long long ns){
        unsigned long long t0, t; asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
        do { asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)); } while (t - t0 < ns); }''', "spin")
    def timed(fn):
        fn(); torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(5):
            fn()
        torch.cuda.synchronize()
        return (time.perf_counter() - t0) / 5 * 1e3
    if kind == "spin":
        call = lambda: spin((132,), (128,), (cupy.uint64(int(ms * 1e6)),))
    else:
        # size the matmul: n x n x n with n from a 4096^3 calibration (the work grows as n^3)
        a = torch.randn(16384, 16384, device="cuda", dtype=torch.bfloat16)
        b = torch.randn(16384, 16384, device="cuda", dtype=torch.bfloat16)
        per = timed(lambda: a[:4096, :4096] @ b[:4096, :4096])
        parts = 8 if kind == "split" else 1
        n = int(4096 * ((ms / parts) / per) ** (1 / 3)) // 128 * 128
        n = max(256, min(16384, n))
        x, y = a[:n, :n], b[:n, :n]
        def call():
            for _ in range(parts):
                x @ y
    got = timed(call)
    print("READY", json.dumps({"call_ms": got}), flush=True)
    for line in sys.stdin:
        if line.strip() != "GO":
            break
        t0 = cupti.get_timestamp()
        for _ in range(calls):
            call()
            torch.cuda.synchronize()
            time.sleep(0.0002)
        t1 = cupti.get_timestamp()
        print("DONE", json.dumps({"t0": t0, "t1": t1}), flush=True)
""")


def trial_rows(meter, proc, calls_ms: float, trials: int, per_call: int) -> list[dict]:
    from ptxcore.gpu.harness.meter import choose_interval_ns

    interval = choose_interval_ns(calls_ms * 1e6, 60, per_call=per_call)
    meter.configure(interval)
    rows = []
    for trial in range(trials):
        meter.start()
        proc.stdin.write("GO\n")
        proc.stdin.flush()
        line = proc.stdout.readline()
        if not line.startswith("DONE"):
            raise RuntimeError(f"child: {line!r}")
        win = json.loads(line.split(" ", 1)[1])
        t0 = time.perf_counter()
        trace = meter.stop()
        stop_s = time.perf_counter() - t0
        lo, hi = win["t0"], win["t1"]
        s = trace.samples
        gaps = [(b.start_ns - a.end_ns, a.end_ns) for a, b in zip(s, s[1:], strict=False)]
        big = max(gaps, default=(0, lo))
        inside = [m for m in s if m.end_ns > lo and m.start_ns < hi]
        rows.append({
            "trial": trial, "interval_us": interval / 1e3, "samples": len(s), "in_window": len(inside),
            "window_ms": (hi - lo) / 1e6, "largest_hole_ms": big[0] / 1e6,
            "hole_at_ms": (big[1] - lo) / 1e6, "busy_over_window": trace.busy_ns(lo, hi) / (hi - lo),
            "first_sample_ms": (s[0].start_ns - lo) / 1e6 if s else None,
            "last_sample_ms": (s[-1].end_ns - lo) / 1e6 if s else None,
            "decoded": str(trace.decoded), "stop_s": round(stop_s, 3),
            "uncovered": trace.uncovered(lo, hi),
        })
    return rows


GMMA_TRIES = (
    ("gr__cycles_active.sum", "gr__cycles_elapsed.max", "sm__pipe_tensor_op_gmma_cycles_active.sum",
     "sm__cycles_elapsed.sum"),
    ("gr__cycles_active.sum", "gr__cycles_elapsed.max", "sm__pipe_tensor_op_gmma_cycles_active_realtime.sum",
     "sm__cycles_elapsed.sum"),
    ("gr__cycles_active.sum", "gr__cycles_elapsed.max", "sm__inst_executed_pipe_tensor_op_gmma.sum"),
    ("gr__cycles_active.sum", "gr__cycles_elapsed.max", "sm__pipe_tensor_op_hmma_cycles_active.sum",
     "sm__cycles_elapsed.sum"),
    # the H200's PM-sampling catalog lists this one (TPC.TriageCompute, 2026-12-02 sixth session); the four above
    # were refused (CUPTI_ERROR_INVALID_PARAMETER): HMMA-only time beside the judge's tensor counter
    ("gr__cycles_active.sum", "gr__cycles_elapsed.max", "sm__pipe_tensor_cycles_active_realtime.sum",
     "sm__pipe_tensor_op_hmma_cycles_active_realtime.sum", "sm__cycles_elapsed.sum"),
    ("gr__cycles_active.sum", "gr__cycles_elapsed.max", "sm__pipe_tensor_op_hmma_cycles_active_realtime.sum",
     "sm__cycles_elapsed.sum"),
)
"""Metric sets that would let the meter tell wgmma (HGMMA) tensor time from mma.sync (HMMA) time: the tensor
counter the judge uses counts both (SECURITY.md, the mma.sync-branch gap). Which ones PM sampling accepts on this
device is what the probe reports."""


def gmma_counters(meter) -> None:
    """PM sampling's tensor / GMMA metric names on this chip, and which GMMA_TRIES sets it accepts in one pass."""
    from research.timing.pm_probe import metric_catalog

    meter.open()
    col = meter._require()
    try:
        try:
            for kind, names in metric_catalog(col._chip_name).items():
                shown = names if isinstance(names, int) else " ".join(n for n in names if "tensor" in n or "mma" in n)
                print(f"catalog {kind}: {shown}", flush=True)
        except Exception as exc:  # noqa: BLE001 - a probe: report and go on
            print(f"catalog: {type(exc).__name__}: {exc}", flush=True)
        for metrics in GMMA_TRIES:
            try:
                col.configure(metrics=list(metrics), sampling_interval=10_000, hardware_buffer_size=64 << 20)
                print(f"accepted: {' + '.join(metrics)}", flush=True)
            except Exception as exc:  # noqa: BLE001 - refused: the next set
                print(f"refused: {' + '.join(metrics)}: {type(exc).__name__}: {exc}", flush=True)
    finally:
        meter.close()


def main() -> int:
    import torch

    from ptxcore.gpu.harness.meter import PmSamplingMeter

    torch.zeros(1, device="cuda")  # a CUDA context first: CUPTI's profiler does not initialize without one
    out = Path(ARGS.out)
    out.mkdir(parents=True, exist_ok=True)
    meter = PmSamplingMeter(0)
    if ARGS.gmma:
        gmma_counters(meter)
    report = []
    try:
        for kind in ARGS.kinds.split(","):
            for ms in (float(v) for v in ARGS.ms.split(",")):
                # opened and closed around each configuration, as a judgement does (the judge's session): on the
                # H200 (2026-12-02) the probe, with one collector kept open across children, segfaulted at its
                # second configuration (which call crashed was not established)
                meter.close()
                meter.open()
                proc = subprocess.Popen([sys.executable, "-c", CHILD, kind, str(ms), "60"], stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                line = proc.stdout.readline()
                if not line.startswith("READY"):
                    proc.kill()
                    print(f"{kind} {ms} ms: child failed: {line!r} {proc.stderr.read()[-1500:]}")
                    continue
                call_ms = json.loads(line.split(" ", 1)[1])["call_ms"]
                try:
                    rows = trial_rows(meter, proc, call_ms, ARGS.trials, ARGS.per_call)
                finally:
                    proc.stdin.close()
                    proc.wait(timeout=60)
                for r in rows:
                    r.update(kind=kind, target_ms=ms, call_ms=round(call_ms, 3))
                    report.append(r)
                    print(f"{kind:5s} {ms:5.1f} ms (call {call_ms:6.2f}) t{r['trial']} interval {r['interval_us']:.0f} us "
                          f"samples {r['samples']:5d} in {r['in_window']:5d} hole {r['largest_hole_ms']:7.2f} ms "
                          f"at {r['hole_at_ms']:7.2f} of {r['window_ms']:7.1f} busy {r['busy_over_window']:.3f} "
                          f"stop {r['stop_s']:.2f} s  {r['decoded']}  uncovered: {r['uncovered']}", flush=True)
    finally:
        meter.close()
    (out / "meter_probe.json").write_text(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("--ms", default="1,6,10.5,20")
    p.add_argument("--kinds", default="spin,mma,split")
    p.add_argument("--trials", type=int, default=3)
    p.add_argument("--per-call", type=int, default=100)
    p.add_argument("--no-gmma", dest="gmma", action="store_false", help="skip the GMMA counter check")
    p.add_argument("--out", default=os.environ.get("OUT", "/tmp/meter-probe"))
    ARGS = p.parse_args()
    sys.exit(main())
