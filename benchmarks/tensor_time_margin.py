"""The tensor-time rule's margin on honest kernels: for every judged envelope whose target carries the work, each
timed trial's metered tensor-pipe time over the least time the counted target FLOPs need at peak
(ptxcore.gpu.pipeline.targetwork.tensor_time_ratios), beside the rule's slack.

    python benchmarks/tensor_time_margin.py ENVELOPES... [--slack 0.25]

ENVELOPES are `ptxbench eval --json` files, JSON Lines of envelopes (the controls' `controls.jsonl`), or folders
of either. Prints one row per envelope (lowest first) and the lowest trial's ratio over the slack; exits 1 when
some trial is below the slack (an honest set must have none), 2 on unreadable input or nothing to compare.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from ptxcore.arch import get_architecture  # noqa: E402
from ptxcore.gpu.pipeline.targetwork import TENSOR_TIME_SLACK, tensor_time_ratios  # noqa: E402
from ptxcore.schema import JudgeResult  # noqa: E402


def envelopes(paths: list[Path]) -> list[tuple[str, dict]]:
    out = []
    for path in paths:
        files = sorted(p for p in path.rglob("*") if p.suffix in (".json", ".jsonl")) if path.is_dir() else [path]
        for f in files:
            text = f.read_text()
            docs = [json.loads(line) for line in text.splitlines() if line.strip()] if f.suffix == ".jsonl" \
                else [json.loads(text)] if text.strip() else []
            for i, doc in enumerate(docs):
                if isinstance(doc, dict) and "status" in doc and "target_instruction" in doc:
                    out.append((doc.get("control") or (f.stem if len(docs) == 1 else f"{f.stem}[{i}]"), doc))
    return out


def rows(docs: list[tuple[str, dict]]) -> list[tuple[str, str, float, float]]:
    """(name, status, lowest ratio, highest ratio) of the envelopes the rule applies to."""
    found = []
    for name, doc in docs:
        result = JudgeResult.model_validate({k: v for k, v in doc.items() if k not in ("control", "wall_s")})
        if result.target_instruction is None:
            continue
        ratios = tensor_time_ratios(result.target_instruction, result.timing_audit, get_architecture(result.arch))
        if ratios:
            found.append((name, result.status.value, min(ratios), max(ratios)))
    return sorted(found, key=lambda r: r[2])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("paths", nargs="+", type=Path)
    ap.add_argument("--slack", type=float, default=TENSOR_TIME_SLACK)
    args = ap.parse_args(argv)
    try:
        table = rows(envelopes(args.paths))
    except (OSError, ValueError) as exc:
        print(f"tensor_time_margin: cannot read the envelopes: {exc}", file=sys.stderr)
        return 2
    if not table:
        print("tensor_time_margin: no envelope whose target carries the work and has metered tensor time",
              file=sys.stderr)
        return 2
    width = max(len(r[0]) for r in table)
    print(f"{'envelope':{width}s}  {'verdict':12s}  {'lowest':>7s}  {'highest':>7s}")
    for name, status, lo, hi in table:
        print(f"{name:{width}s}  {status:12s}  {lo:7.3f}  {hi:7.3f}")
    lowest = table[0][2]
    print(f"\n{len(table)} envelopes; lowest trial ratio {lowest:.3f}, slack {args.slack}: "
          f"margin {lowest / args.slack:.1f}x")
    return 0 if lowest >= args.slack else 1


if __name__ == "__main__":
    sys.exit(main())
