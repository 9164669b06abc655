"""Reference (baseline library) latency of the five primary problems on this GPU, timed with the judge's
protocol (3 trials x (10 warm-up + 50 timed), CUPTI spans, L2 flushed, outputs verified).

    python benchmarks/device/reference_latencies.py [--cache-dir DIR] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cache-dir", default=None)
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    from ptxcore.gpu import JudgeConfig
    from ptxcore.gpu.pipeline.judge import GpuJudge
    from ptxcore.problems import load_catalog

    judge = GpuJudge(JudgeConfig(cache_dir=Path(args.cache_dir) if args.cache_dir else None))
    gpu = judge.gpu()
    rows = []
    for p in [p for p in load_catalog().values() if p.extension.primary]:
        t0 = time.monotonic()
        try:
            state = judge.workload_state(p, None)
            ref = judge._reference(state, p, gpu)
            rows.append({"problem": p.name, "latency_ms": ref.latency_ms, "trial_medians_ms": ref.trial_medians_ms,
                         "cached": ref.cached, "throttle": ref.throttle_reasons})
        except Exception as exc:  # noqa: BLE001 - report and continue with the next problem
            rows.append({"problem": p.name, "error": f"{type(exc).__name__}: {exc}"[:500]})
        rows[-1]["seconds"] = round(time.monotonic() - t0, 1)
        judge.drop_workload_state()
        print(json.dumps(rows[-1]), flush=True)
    print(f"GPU {gpu.env['gpu_name']}, driver {gpu.env['driver_version']}")
    for r in rows:
        print(f"  {r['problem']:<28} {r.get('latency_ms', float('nan')):9.4f} ms  {r.get('error', '')}")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    return 0 if all("error" not in r for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
