"""Time the warehouse on the published PTXBench per-turn results and print a table.

    python benchmarks/warehouse_import.py [CSV] [--repeat N]

Measures (fresh warehouse file per import; min and median over N repeats):
  import        Warehouse(...) + import_ptxbench_csv of all turns (parse, validate, upsert, commit)
  reimport      the same CSV again into the filled file (idempotent upsert path)
  metrics query SELECT * FROM v_turn_metrics (what `ptxbench report turn-metrics --json` runs)
  fast_p query  SELECT * FROM v_fast_p (all curves, 301 thresholds)
  python metrics  ptxcore.metrics.turn_metrics over the turn outcomes
  CLI turn-metrics  `ptxbench report turn-metrics --json` end to end (process start included)
Targets (issue 7): import < 5 s, metrics query < 1 s.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from ptxcore.metrics import turn_metrics  # noqa: E402
from ptxcore.warehouse import Warehouse  # noqa: E402
from ptxcore.warehouse import queries as Q  # noqa: E402
from ptxcore.warehouse.ptxbench_import import import_ptxbench_csv  # noqa: E402

DEFAULT_CSV = REPO / "data" / "ptxbench" / "ptxbench_per_turn.csv.gz"


def timed(fn: Callable[[], object], repeat: int) -> list[float]:
    out = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("csv", nargs="?", default=str(DEFAULT_CSV))
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    if not Path(args.csv).is_file():
        sys.exit(f"no such file: {args.csv}")
    tmp = Path(tempfile.mkdtemp(prefix="wh-bench-"))
    counter = iter(range(10**6))

    def fresh_import() -> None:
        with Warehouse(tmp / f"w{next(counter)}.duckdb") as wh:
            import_ptxbench_csv(wh, args.csv)

    results: list[tuple[str, list[float], float | None]] = [("import (fresh file)", timed(fresh_import, args.repeat), 5.0)]
    db = tmp / "w0.duckdb"
    with Warehouse(db) as wh:
        results.append(("reimport (same keys)", timed(lambda: import_ptxbench_csv(wh, args.csv), args.repeat), None))
        n_turns = wh.sql("SELECT count(*) FROM turns")[1][0][0]
    with Warehouse(db, read_only=True) as wh:
        results.append(("metrics query (v_turn_metrics)",
                        timed(lambda: wh.sql("SELECT * FROM v_turn_metrics ORDER BY run, model, arch, definition, k"),
                              args.repeat), 1.0))
        results.append(("fast_p query (v_fast_p)", timed(lambda: wh.sql("SELECT * FROM v_fast_p"), args.repeat), None))
        outcomes = Q.turn_outcomes(wh)
        results.append(("python metrics (turn_metrics)", timed(lambda: turn_metrics(outcomes), args.repeat), None))
    cli = [sys.executable, "-c", "from flows.cli.main import app; app()", "report", "turn-metrics", "--db", str(db),
           "--json"]
    env = {**os.environ, "PYTHONPATH": str(REPO)}

    def run_cli() -> None:
        out = subprocess.run(cli, check=True, capture_output=True, text=True, env=env, cwd=REPO)
        assert out.stdout.startswith("[{"), out.stdout[:200]

    results.append(("CLI report turn-metrics --json", timed(run_cli, args.repeat), None))
    print(f"{n_turns} turns from {args.csv}; {args.repeat} repeats; {os.cpu_count()} CPUs; load {os.getloadavg()[0]:.2f}")
    print(f"{'step':34s} {'min s':>8s} {'median s':>9s} {'target':>8s}  ok")
    for name, ts, target in results:
        ok = "" if target is None else ("yes" if min(ts) < target else "NO")
        tgt = "" if target is None else f"< {target:g} s"
        print(f"{name:34s} {min(ts):8.3f} {statistics.median(ts):9.3f} {tgt:>8s}  {ok}")


if __name__ == "__main__":
    main()
