"""Turn GPU verdict envelopes (`ptxbench eval --json` outputs) into a recorded-verdict set (FlashInfer-Trace folder).

    python solutions/record_verdicts.py ENVELOPES... --kernels DIR... --out campaigns/recorded/NAME
        [--author ptxbench-h200] [--judged-at 2026-12-01T17:00:00+00:00]   (default: each envelope's mtime)

ENVELOPES are JSON files or folders of them. Each envelope names the sha256 of the kernel text it judged
(`compile.source_sha256`); the kernel is looked up by that hash among the .cu files under --kernels (default:
this folder), so a trace is written only for the exact text that was judged. Envelopes without a GPU verdict
(INFRA_ERROR, NOT_EVALUATED) or without a matching kernel are listed and skipped. A campaign with
`recorded_verdicts: recorded/NAME` (or `--profiler recorded:PATH`) then reuses these verdicts, marked as
recorded with their GPU, driver and date, for every turn whose kernel is one of them.
Exit 0 when at least one trace was written; 1 otherwise; 2 for a bad argument.
"""

from __future__ import annotations

import argparse
import json
import sys
from datetime import UTC, datetime
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from ptxcore.problems import get_problem  # noqa: E402
from ptxcore.problems.traceset import JudgedKernel, TraceSetWriter  # noqa: E402
from ptxcore.schema import EvaluationStatus, JudgeResult, text_sha256  # noqa: E402

UNJUDGED = (EvaluationStatus.INFRA_ERROR, EvaluationStatus.NOT_EVALUATED)


def envelopes(paths: list[Path]) -> list[Path]:
    found: list[Path] = []
    for p in paths:
        if p.is_dir():
            found += sorted(p.rglob("*.json"))
        elif p.is_file():
            found.append(p)
        else:
            raise SystemExit(f"error: {p}: no such file or folder")
    return found


def kernels_by_hash(dirs: list[Path]) -> dict[str, str]:
    out: dict[str, str] = {}
    for d in dirs:
        for path in sorted(d.rglob("*.cu")) if d.is_dir() else [d]:
            text = path.read_text()
            out.setdefault(text_sha256(text), text)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("envelopes", nargs="+", type=Path)
    ap.add_argument("--kernels", nargs="+", type=Path, default=[HERE])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--author", default="ptxbench-h200")
    ap.add_argument("--judged-at", default="", help="ISO-8601 time of the judgement (default: the envelope "
                    "file's modification time, which `tar x` and `cp -p` keep)")
    args = ap.parse_args(argv)
    texts = kernels_by_hash(args.kernels)
    writer = TraceSetWriter()
    for path in envelopes(args.envelopes):
        try:
            judge = JudgeResult.model_validate(json.loads(path.read_text()))
        except ValueError as exc:
            print(f"skip {path}: not a verdict envelope ({str(exc).splitlines()[0]})")
            continue
        if judge.status in UNJUDGED or judge.compile is None:
            print(f"skip {path.name}: {judge.status.value}, no GPU verdict to record")
            continue
        text = texts.get(judge.compile.source_sha256)
        if text is None:
            print(f"skip {path.name}: no kernel under --kernels has sha256 {judge.compile.source_sha256[:12]}")
            continue
        judged_at = args.judged_at or datetime.fromtimestamp(path.stat().st_mtime, UTC).isoformat(timespec="seconds")
        writer.add(JudgedKernel(author=args.author, kernel_text=text, judge=judge, created_at=judged_at,
                                hardware=judge.environment.gpu_name or None), get_problem(judge.definition))
        print(f"record {judge.definition} {judge.compile.source_sha256[:12]} {judge.status.value}")
    if writer.count == 0:
        print("error: no verdict recorded", file=sys.stderr)
        return 1
    writer.write(args.out)
    print(f"wrote {writer.count} traces to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
