"""How long GPU slots stay idle between judge tasks, by the Prefect server's tag-slot wait.

A judge task that finds its `gpu:<arch>` slots taken is told by the server to retry after
min(mean slot occupancy x blocked slots, PREFECT_SERVER_TASKS_TAG_CONCURRENCY_SLOT_WAIT_SECONDS) seconds
(Prefect's default cap: 10 s), so a slot freed in the meantime stays idle until the retry. This runs the same
small campaign (scripted replay model, real compile, a simulated judge that holds its slot --judge-s seconds)
under each cap, each in its own `ptxbench campaign run` on its own temporary Prefect server, and prints the
wall time and the slot utilisation = judged turns x judge seconds / (slots x judge phase).

    python benchmarks/campaign_slot_wait.py [--waits 10,default] [--judge-s 3] [--trajectories 4] [--turns 3]

CPU only; the judge is the fake of tests/flows/fakes.py (sleeps, fixed verdicts): these numbers are about
orchestration, not about kernels.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

CONFIG = """\
name: {name}
models:
  - model: replay/scripted
architectures: [hopper]
problems: [mha_with_lse_d128]
prompt_variants: [hopper-pack]
trajectories: {trajectories}
turns: {turns}
judge_retry_delay_s: 0
concurrency:
  trajectories: {trajectories}
  compile: 2
  gpu_slots: {{hopper: {slots}}}
"""
CLI = "from flows.cli.main import app; app()"


def run_arm(name: str, wait: str, args, work: Path) -> dict:
    cfg = work / f"{name}.yaml"
    cfg.write_text(CONFIG.format(name=name, trajectories=args.trajectories, turns=args.turns, slots=args.slots))
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_API_URL")}
    env.update(FAKE_JUDGE_DELAY_S=str(args.judge_s), PTXBENCH_CACHE_DIR=str(work / "cache"),
               PTXBENCH_LOG="INFO", PREFECT_LOGGING_LEVEL="WARNING")
    env.pop("PREFECT_SERVER_TASKS_TAG_CONCURRENCY_SLOT_WAIT_SECONDS", None)
    if wait != "default":  # "default": whatever `ptxbench campaign run` sets (1 s since 2026-11-29)
        env["PREFECT_SERVER_TASKS_TAG_CONCURRENCY_SLOT_WAIT_SECONDS"] = wait
    cmd = [sys.executable, "-c", CLI, "campaign", "run", str(cfg), "--warehouse", str(work / f"{name}.duckdb"),
           "--mlflow-uri", f"sqlite:///{work / 'mlflow.db'}", "--judge-plugin", "tests.flows.fakes:fake_judge",
           "--json"]
    t0 = time.monotonic()
    out = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=3600)
    wall = time.monotonic() - t0
    if out.returncode != 0:
        raise SystemExit(f"arm {name} failed (exit {out.returncode}): {out.stderr.strip().splitlines()[-1:]}")
    return {"name": name, "wait": wait, "wall_s": wall, **_judge_phase(work / f"{name}.duckdb", name)}


def _judge_phase(db: Path, campaign: str) -> dict:
    """Judged turns and the span from the first judged turn's creation to the last one's (warehouse times)."""
    import duckdb

    with duckdb.connect(str(db), read_only=True) as con:
        rows = con.execute("SELECT count(*), min(created_at), max(created_at) FROM turns WHERE campaign_id = ? "
                           "AND status NOT IN ('COMPILE_ERROR', 'EXTRACTION_ERROR')", [campaign]).fetchone()
    judged, first, last = rows
    from datetime import datetime

    span = (datetime.fromisoformat(last) - datetime.fromisoformat(first)).total_seconds() if judged else 0.0
    return {"judged": judged, "span_s": span}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--waits", default="10,default",
                    help="slot-wait caps to compare, seconds, or 'default' (the CLI's; Prefect's own is 10)")
    ap.add_argument("--judge-s", type=float, default=3.0, help="seconds the simulated judge holds its slot")
    ap.add_argument("--trajectories", type=int, default=4)
    ap.add_argument("--turns", type=int, default=3)
    ap.add_argument("--slots", type=int, default=1)
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="slot-wait-"))
    print(f"# warm-up run (fills the compile cache; not counted) in {work}", flush=True)
    run_arm("warmup", "1", args, work)
    rows = []
    for wait in args.waits.split(","):
        r = run_arm(f"wait{wait.replace('.', '_')}", wait, args, work)
        busy = r["judged"] * args.judge_s
        # the judge phase spans first to last judged record; add one judgement for the first one's own time
        util = busy / (args.slots * (r["span_s"] + args.judge_s)) if r["judged"] else 0.0
        rows.append((wait, r["judged"], r["wall_s"], r["span_s"] + args.judge_s, util))
        print(f"  wait cap {wait} s: wall {r['wall_s']:.1f} s, {r['judged']} judged turns", flush=True)
    print(f"\nslot wait cap (s) | judged turns | wall s | judge phase s | slot utilisation   "
          f"({args.slots} slot(s), judge {args.judge_s:g} s, {args.trajectories} trajectories x {args.turns} turns)")
    for wait, judged, wall, phase, util in rows:
        print(f"{wait:>17} | {judged:>12} | {wall:6.1f} | {phase:13.1f} | {100 * util:5.0f}%")
    return 0


if __name__ == "__main__":
    sys.exit(main())
