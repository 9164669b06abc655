"""Build the results table of solutions/triton/README.md from the rows the GPU check wrote.

    python tools/triton_table.py OUT/triton_rows.jsonl [--readme solutions/triton/README.md]

Rows come from tests/gpu/test_triton_gpu.py (PTXBENCH_TRITON_OUT): `solution` rows (errors, do_bench
latencies, static SASS families of the launched cubins), `ncu` rows (executed target families) and `judge`
rows (the judge's verdict once it takes Triton). Without --readme the table goes to stdout.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

BEGIN, END = "<!-- results:begin -->", "<!-- results:end -->"


def load_rows(path: Path) -> list[dict]:
    rows = []
    for n, line in enumerate(path.read_text().splitlines(), 1):
        if line.strip():
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError as exc:
                raise SystemExit(f"{path}:{n}: not a JSON row ({exc.msg})") from None
    return rows


def table(rows: list[dict]) -> str:
    ncu = {(r["problem"], r["kernel"]): r for r in rows if r.get("check") == "ncu"}
    judge = {(r["problem"], r["kernel"]): r for r in rows if r.get("check") == "judge" and "kernel" in r}
    out = ["| Problem | Kernel | Judge verdict | Mismatches | do_bench (ms) | Baseline (ms) | Speedup | Static SASS "
           "| ncu executed |", "|---|---|---|---|---|---|---|---|---|"]
    for r in (r for r in rows if r.get("check") == "solution"):
        key = (r["problem"], r["kernel"])
        mism = sum(e["mismatches"] for e in r["errors"].values())
        fams = ", ".join(f"{k} {v}" for k, v in sorted(r["families"].items())) or "none"
        n = ncu.get(key)
        executed = "not run" if n is None else f"{n['status']} (" + ", ".join(
            f"{k} {v:,}" for k, v in sorted(n["counts"].items())) + ")"
        verdict = judge[key]["status"] + " / " + judge[key]["target"] if key in judge else "not wired"
        out.append(f"| {r['problem']} | `{r['kernel']}` | {verdict} | {mism} | {r['latency_ms']:.4f} | "
                   f"{r['baseline_ms']:.4f} | {r['speedup']:.3f} | {fams} | {executed} |")
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="make_table")
    p.add_argument("rows", type=Path)
    p.add_argument("--readme", type=Path)
    args = p.parse_args(argv)
    if not args.rows.is_file():
        print(f"no such rows file: {args.rows}", file=sys.stderr)
        return 2
    text = table(load_rows(args.rows))
    if args.readme is None:
        sys.stdout.write(text)
        return 0
    readme = args.readme.read_text()
    if BEGIN not in readme or END not in readme:
        print(f"{args.readme} has no {BEGIN} ... {END} block", file=sys.stderr)
        return 2
    head, rest = readme.split(BEGIN, 1)
    args.readme.write_text(head + BEGIN + "\n" + text + END + rest.split(END, 1)[1])
    return 0


if __name__ == "__main__":
    sys.exit(main())
