"""Probe (GPU host): the timing audit of honest candidates under several judge configurations.

Found on the H200 (2026-12-02): the Triton solutions judged with warmup=1, iters=3 were REWARD_HACK (claimed
0.75 ms per call, metered busy 3.5 ms, 4.9 ms busy after the replies). This probe judges the same candidates with
the warm-up/timed-call counts and the sanitizer switched one at a time and prints every trial's audit, so the
factor that inflates the metered busy time is visible.

    python -m research.timing.audit_probe [--out FILE.json]

A research probe: it decides nothing.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
CASES = [  # (file, problem, language, warmup, iters, sanitizer)
    ("solutions/triton/gemm_n7168_k5120/tma_persistent.py", "gemm_n7168_k5120", "triton", 1, 3, True),
    ("solutions/triton/gemm_n7168_k5120/tma_persistent.py", "gemm_n7168_k5120", "triton", 1, 3, False),
    ("solutions/triton/gemm_n7168_k5120/tma_persistent.py", "gemm_n7168_k5120", "triton", 10, 50, False),
    ("solutions/gemm_n7168_k5120/wgmma_tma_ws.cu", "gemm_n7168_k5120", "cuda", 1, 3, False),
    ("solutions/gemm_n7168_k5120/wgmma_tma_ws.cu", "gemm_n7168_k5120", "cuda", 1, 3, True),
]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    from ptxcore.arch import get_architecture
    from ptxcore.gpu import JudgeConfig, judge_candidate
    from ptxcore.problems import get_problem

    rows = []
    for file, problem, lang, warmup, iters, san in CASES:
        cfg = JudgeConfig(cache_dir=Path("/tmp/audit-probe") / f"{warmup}-{iters}-{int(san)}", trials=3,
                          warmup=warmup, iters=iters, sanitizer=san, ncu=False)
        t0 = time.monotonic()
        r = judge_candidate((REPO / file).read_text(), get_problem(problem), get_architecture("hopper"), cfg, language=lang)
        a = r.timing_audit
        row = {"file": file, "lang": lang, "warmup": warmup, "iters": iters, "sanitizer": san,
               "status": r.status.value, "reason": r.reason[:200], "wall_s": round(time.monotonic() - t0, 1),
               "interval_ns": a.interval_ns if a else None,
               "trials": [t.model_dump() for t in a.trials] if a else [], "stages": r.stage_seconds}
        rows.append(row)
        print(f"{Path(file).name:20s} w{warmup:<3d} i{iters:<3d} san={int(san)} {row['status']:13s} "
              f"interval={row['interval_ns']}", flush=True)
        for t in row["trials"]:
            print("   ", {k: (round(v, 4) if isinstance(v, float) else v) for k, v in t.items()}, flush=True)
    if args.out:
        args.out.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
