"""Turn GPU verdicts (JudgeResult envelopes of benchmarks/device/judge_batch.py) into a recorded-verdict folder:
a FlashInfer-Trace dataset that the `recorded:` judge route (and a campaign's `recorded_verdicts:`) reuses by
kernel hash where no GPU is available.

    python benchmarks/record_verdicts.py RESULTS_DIR OUT_DIR [--author ptxbench-h200] [--check]

RESULTS_DIR holds <name>.json envelopes and kernels/<name>.cu, the exact texts judged. Only verdicts reached on
a GPU are kept (NOT_EVALUATED and INFRA_ERROR say nothing about a kernel). `--check` exits 1 when OUT_DIR
differs from what RESULTS_DIR would write.
"""

from __future__ import annotations

import argparse
import filecmp
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def build(results: Path, out: Path, author: str) -> int:
    from ptxcore.problems import get_problem
    from ptxcore.problems.traceset import JudgedKernel, TraceSetWriter
    from ptxcore.schema import EvaluationStatus, JudgeResult

    writer = TraceSetWriter()
    for envelope in sorted(results.glob("*.json")):
        kernel = results / "kernels" / f"{envelope.stem}.cu"
        judge = JudgeResult.model_validate_json(envelope.read_text())
        if judge.status in (EvaluationStatus.NOT_EVALUATED, EvaluationStatus.INFRA_ERROR) or not kernel.is_file():
            continue
        if judge.environment.gpu_name is None and judge.compile is not None and judge.compile.verdict is None:
            continue  # a compiled kernel without a GPU environment was not judged on a GPU
        stamp = results / "kernels" / f"{envelope.stem}.judged_at"
        judged_at = stamp.read_text().strip() if stamp.is_file() else _judged_at(envelope)
        writer.add(JudgedKernel(author=author, kernel_text=kernel.read_text(), judge=judge, created_at=judged_at,
                                description=f"{envelope.stem}, judged with the default protocol"),
                   get_problem(judge.definition))
    writer.write(out)
    return writer.count


def _judged_at(envelope: Path) -> str:
    from datetime import UTC, datetime

    return datetime.fromtimestamp(envelope.stat().st_mtime, UTC).isoformat(timespec="seconds")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("results")
    ap.add_argument("out")
    ap.add_argument("--author", default="ptxbench-h200")
    ap.add_argument("--check", action="store_true")
    args = ap.parse_args()
    results, out = Path(args.results), Path(args.out)
    if not results.is_dir():
        print(f"error: {results} is not a directory", file=sys.stderr)
        return 2
    if args.check:
        with tempfile.TemporaryDirectory() as tmp:
            build(results, Path(tmp), args.author)
            same = _same_tree(Path(tmp), out)
        print("up to date" if same else f"{out} is stale: rebuild it")
        return 0 if same else 1
    n = build(results, out, args.author)
    print(f"wrote {n} recorded verdicts to {out}")
    return 0


def _same_tree(a: Path, b: Path) -> bool:
    files_a = sorted(p.relative_to(a) for p in a.rglob("*") if p.is_file())
    files_b = sorted(p.relative_to(b) for p in b.rglob("*") if p.is_file()) if b.is_dir() else []
    return files_a == files_b and all(filecmp.cmp(a / f, b / f, shallow=False) for f in files_a)


if __name__ == "__main__":
    raise SystemExit(main())
