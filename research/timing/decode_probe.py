"""Probe (GPU host): the device meter's sample reader (harness.pmdecode) against cupti-python's decode.

Each repeat samples a trial-like span of bf16 matmuls with host gaps in this process, stops the sampler, decodes
the hardware buffer once into a counter image, and reads that one image twice: with the reader (one params
struct per call kind, the meter's own profiler host) and with cupti-python's own `CounterData` (a profiler host
of its own, then `Sample` by sample), the timestamps also read the library's way (a fresh struct per sample).
Both must give the same timestamps and the same metric values, bit for bit; the table gives the host seconds of
each part. A last repeat per interval runs `drain` both ways on two separate spans, as the judge's stop does.

    python -m research.timing.decode_probe [--interval-ns 30000,8000] [--repeats 3] [--span-s 0.17] [--out DIR]

A research probe: it decides nothing; its numbers went into benchmarks/device/RESULTS.md.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path


def _work(span_s: float) -> None:
    import torch

    a = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)
    end = time.monotonic() + span_s
    while time.monotonic() < end:
        a @ a
        torch.cuda.synchronize()
        time.sleep(0.0002)


def _library_timestamps(cc, col, image) -> tuple[list[int], list[int]]:
    """The library's loop (cupti-python 13.3 `Collector.decode`): a new params struct for every sample."""
    starts, ends = [], []
    n = _completed(cc, image)
    for i in range(n):
        p = cc.PmSampling_CounterData_GetSampleInfo_Params()
        p.struct_size = cc.PM_SAMPLING_COUNTER_DATA_GET_SAMPLE_INFO_PARAMS_STRUCT_SIZE
        p.p_pm_sampling_object = col._pm_sampling_object
        p.p_counter_data_image, p.counter_data_image_size = image.ctypes.data, len(image)
        p.sample_index = i
        cc.pm_sampling_counter_data_get_sample_info(p.ptr)
        starts.append(p.start_timestamp)
        ends.append(p.end_timestamp)
    return starts, ends


def _completed(cc, image) -> int:
    info = cc.PmSampling_GetCounterDataInfo_Params()
    info.struct_size = cc.PM_SAMPLING_GET_COUNTER_DATA_INFO_PARAMS_STRUCT_SIZE
    info.p_counter_data_image, info.counter_data_image_size = image.ctypes.data, len(image)
    cc.pm_sampling_get_counter_data_info(info.ptr)
    return int(info.num_completed_samples)


def one_image(meter, span_s: float) -> dict:
    from cupti import cupti as cc
    from cupti import pm_sampling

    col, reader = meter._collector, meter._reader
    meter.start()
    _work(span_s)
    time.sleep(meter._settle_s())
    col.stop()
    max_samples = int(span_s * 1.5 * 1e9 / meter.interval_ns) + 2_000
    t0 = time.perf_counter()
    image, total, populated, completed = reader.decode_image(max_samples)
    t1 = time.perf_counter()
    ptr, size = image.ctypes.data, len(image)
    starts, ends = reader.timestamps(ptr, size, completed)
    t2 = time.perf_counter()
    values = reader.evaluate(ptr, size, completed)
    t3 = time.perf_counter()
    lib_starts, lib_ends = _library_timestamps(cc, col, image)
    t4 = time.perf_counter()
    data = pm_sampling.CounterData(image=image, metrics=list(meter.metrics), chip_name=col._chip_name,
                                   num_total_samples=total, num_populated_samples=populated,
                                   num_completed_samples=completed, start_timestamps=lib_starts,
                                   end_timestamps=lib_ends)
    t5 = time.perf_counter()
    lib_values = [tuple(s.metric_values) for s in data]
    t6 = time.perf_counter()
    same_ts = list(starts) == lib_starts and list(ends) == lib_ends
    same_values = list(values) == lib_values
    return {"interval_ns": meter.interval_ns, "samples": completed, "populated": populated, "total": total,
            "image_decode_s": t1 - t0, "reader_timestamps_s": t2 - t1, "reader_evaluate_s": t3 - t2,
            "library_timestamps_s": t4 - t3, "library_host_init_s": t5 - t4, "library_evaluate_s": t6 - t5,
            "same_timestamps": same_ts, "same_values": same_values}


def drained(meter, span_s: float, fast: bool) -> dict:
    from ptxcore.gpu.harness.meter import drain

    meter.start()
    _work(span_s)
    time.sleep(meter._settle_s())
    meter._collector.stop()
    max_samples = int(span_s * 1.5 * 1e9 / meter.interval_ns) + 2_000
    t0 = time.perf_counter()
    samples, decoded = drain(meter._collector, max_samples, meter.metrics, meter._reader if fast else None)
    wall = time.perf_counter() - t0
    busy = sum(s.busy_ns for s in samples) / max(1, samples[-1].end_ns - samples[0].start_ns) if samples else 0.0
    return {"path": "reader" if fast else "library", "interval_ns": meter.interval_ns, "samples": len(samples),
            "wall_s": wall, "decode_s": decoded.decode_s, "evaluate_s": decoded.evaluate_s, "busy_fraction": busy}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--interval-ns", default="30000,8000")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--span-s", type=float, default=0.17, help="seconds sampled per repeat (a GEMM trial's span)")
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--only", choices=("library", "reader"), default=None,
                    help="no comparison: drain every span one way only, reconfiguring between intervals")
    args = ap.parse_args(argv)
    import torch

    from ptxcore.gpu.harness.meter import PmSamplingMeter

    torch.cuda.init()
    meter = PmSamplingMeter(0)
    meter.open()
    rows, drains = [], []
    try:
        for interval in (int(v) for v in args.interval_ns.split(",")):
            t0 = time.perf_counter()
            meter.configure(interval)
            print(f"# interval {interval} ns: configured in {time.perf_counter() - t0:.3f} s, "
                  f"reader {'yes' if meter._reader is not None else 'NO'}", flush=True)
            if meter._reader is None:
                print("error: no sample reader on this cupti-python", file=sys.stderr)
                return 1
            if args.only is not None:
                for _ in range(args.repeats):
                    drains.append(drained(meter, args.span_s, args.only == "reader"))
                    print(f"#   drain {drains[-1]['path']}: {drains[-1]['samples']} samples", flush=True)
                continue
            for i in range(args.repeats):
                rows.append(one_image(meter, args.span_s))
                print(f"#   image {i}: {rows[-1]['samples']} samples, same {rows[-1]['same_values']}", flush=True)
            for fast in (False, True, True, False):
                drains.append(drained(meter, args.span_s, fast))
                print(f"#   drain {drains[-1]['path']}: {drains[-1]['samples']} samples", flush=True)
    finally:
        meter.close()
    keys = ("image_decode_s", "reader_timestamps_s", "reader_evaluate_s", "library_timestamps_s",
            "library_host_init_s", "library_evaluate_s")
    print("one image read both ways (median s per image):")
    print(f"{'interval_ns':>11} {'samples':>7} " + " ".join(f"{k[:-2]:>20}" for k in keys) + "  same")
    for interval in sorted({r["interval_ns"] for r in rows}, reverse=True):
        sub = [r for r in rows if r["interval_ns"] == interval]
        same = all(r["same_timestamps"] and r["same_values"] for r in sub)
        print(f"{interval:>11} {int(statistics.median(r['samples'] for r in sub)):>7} "
              + " ".join(f"{statistics.median(r[k] for r in sub):>20.4f}" for k in keys) + f"  {same}")
    print("drain, as the meter's stop runs it (A B B A per interval):")
    print(f"{'path':>8} {'interval_ns':>11} {'samples':>7} {'wall_s':>8} {'decode_s':>8} {'evaluate_s':>10} {'busy':>6}")
    for d in drains:
        print(f"{d['path']:>8} {d['interval_ns']:>11} {d['samples']:>7} {d['wall_s']:>8.4f} {d['decode_s']:>8.4f} "
              f"{d['evaluate_s']:>10.4f} {d['busy_fraction']:>6.3f}")
    ok = all(r["same_timestamps"] and r["same_values"] for r in rows)
    print(f"reader and library agree on every image: {ok}")
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "decode_probe.json").write_text(json.dumps({"images": rows, "drains": drains}, indent=1))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
