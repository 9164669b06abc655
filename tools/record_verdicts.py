"""Turn GPU verdict envelopes into a recorded-verdict set: a FlashInfer-Trace folder that the `recorded:` judge route
(and a campaign's `recorded_verdicts:`) reuses by kernel hash where no GPU is available.

    python tools/record_verdicts.py ENVELOPES... --out campaigns/recorded/NAME [--kernels DIR...]
        [--author ptxbench-h200] [--judged-at 2026-12-01T17:00:00+00:00] [--check]

ENVELOPES are JudgeResult JSON files (`ptxbench eval --json`, benchmarks/device/judge_batch.py) or folders of them.
Each envelope names the sha256 of the kernel text it judged (`compile.source_sha256`); the kernel is looked up by
that hash among the .cu and .py files under --kernels (default: solutions/, plus the kernels/ folder beside the
envelopes, where judge_batch.py keeps the exact texts it judged), so a trace is written only for the exact text
that was judged. Envelopes without a GPU verdict (INFRA_ERROR, NOT_EVALUATED, or compiled but never run on a GPU)
or without a matching kernel are listed and skipped. The time of a judgement: --judged-at, else a
kernels/<name>.judged_at stamp beside the envelope, else the envelope file's modification time (which `tar x` and
`cp -p` keep). A campaign with `recorded_verdicts: recorded/NAME` (or `--profiler recorded:PATH`) then reuses
these verdicts, marked as recorded with their GPU, driver and date, for every turn whose kernel is one of them.

--check writes into a temporary folder and compares it with --out. Exit 0 when at least one trace was written
(--check: when --out is current); 1 otherwise; 2 for a bad argument.
"""

from __future__ import annotations

import argparse
import filecmp
import json
import sys
import tempfile
from datetime import UTC, datetime
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from ptxcore.problems import get_problem  # noqa: E402
from ptxcore.problems.traceset import JudgedKernel, TraceSetWriter  # noqa: E402
from ptxcore.schema import EvaluationStatus, JudgeResult, text_sha256  # noqa: E402

UNJUDGED = (EvaluationStatus.INFRA_ERROR, EvaluationStatus.NOT_EVALUATED)
KERNEL_SUFFIXES = (".cu", ".py")


class BadArgument(ValueError):
    """A path on the command line that is not there."""


def envelopes(paths: list[Path]) -> list[Path]:
    found: list[Path] = []
    for p in paths:
        if p.is_dir():
            found += sorted(q for q in p.rglob("*.json") if q.is_file())
        elif p.is_file():
            found.append(p)
        else:
            raise BadArgument(f"{p}: no such file or folder")
    return found


def kernels_by_hash(dirs: list[Path]) -> dict[str, str]:
    """sha256 of the text -> text, of every kernel file under `dirs` (files that are not UTF-8 are no kernel)."""
    out: dict[str, str] = {}
    for d in dirs:
        files = sorted(p for p in d.rglob("*") if p.suffix in KERNEL_SUFFIXES and p.is_file()) if d.is_dir() else [d]
        for path in files:
            try:
                text = path.read_text()
            except (OSError, UnicodeDecodeError):
                continue
            out.setdefault(text_sha256(text), text)
    return out


def unjudged(judge: JudgeResult) -> str | None:
    """Why an envelope holds no GPU verdict to record (None: it does)."""
    if judge.status in UNJUDGED:
        return f"{judge.status.value}, no GPU verdict to record"
    if judge.compile is None:
        return "no compile result, so no kernel hash"
    if judge.environment.gpu_name is None and judge.compile.verdict is None:
        return "compiled but not judged on a GPU"
    return None


def judged_at(envelope: Path, given: str | None) -> str:
    stamp = envelope.parent / "kernels" / f"{envelope.stem}.judged_at"
    if given:
        return given
    if stamp.is_file():
        return stamp.read_text().strip()
    return datetime.fromtimestamp(envelope.stat().st_mtime, UTC).isoformat(timespec="seconds")


def build(paths: list[Path], kernel_dirs: list[Path], out: Path, author: str, given_time: str | None,
          say: bool = True) -> int:
    """Write the recorded-verdict set of `paths` to `out` (nothing when no trace would be written)."""
    texts = kernels_by_hash(kernel_dirs)
    note = print if say else (lambda _line: None)
    writer = TraceSetWriter()
    for path in envelopes(paths):
        try:
            judge = JudgeResult.model_validate(json.loads(path.read_text()))
        except (ValueError, UnicodeDecodeError) as exc:
            note(f"skip {path}: not a verdict envelope ({str(exc).splitlines()[0]})")
            continue
        why = unjudged(judge)
        text = texts.get(judge.compile.source_sha256) if judge.compile is not None else None
        if why is None and text is None:
            why = f"no kernel under --kernels has sha256 {judge.compile.source_sha256[:12]}"
        if why is not None:
            note(f"skip {path.name}: {why}")
            continue
        writer.add(JudgedKernel(author=author, kernel_text=text, judge=judge, created_at=judged_at(path, given_time),
                                hardware=judge.environment.gpu_name or None), get_problem(judge.definition))
        note(f"record {judge.definition} {judge.compile.source_sha256[:12]} {judge.status.value}")
    if writer.count:
        writer.write(out)
    return writer.count


def same_tree(a: Path, b: Path) -> bool:
    files_a = sorted(p.relative_to(a) for p in a.rglob("*") if p.is_file())
    files_b = sorted(p.relative_to(b) for p in b.rglob("*") if p.is_file()) if b.is_dir() else []
    return files_a == files_b and all(filecmp.cmp(a / f, b / f, shallow=False) for f in files_a)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("envelopes", nargs="+", type=Path)
    ap.add_argument("--kernels", nargs="+", type=Path, default=None,
                    help="folders (or files) of the judged kernel texts (default: solutions/ and the kernels/ "
                         "folder beside the envelopes)")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--author", default="ptxbench-h200")
    ap.add_argument("--judged-at", default=None, help="ISO-8601 time of the judgement (default: a .judged_at "
                    "stamp, else the envelope file's modification time)")
    ap.add_argument("--check", action="store_true", help="only compare --out with what would be written")
    args = ap.parse_args(argv)
    kernel_dirs = args.kernels or [REPO / "solutions", *(p / "kernels" for p in args.envelopes if p.is_dir())]
    try:
        if args.check:
            with tempfile.TemporaryDirectory() as tmp:
                build(args.envelopes, kernel_dirs, Path(tmp) / "set", args.author, args.judged_at, say=False)
                current = same_tree(Path(tmp) / "set", args.out)
            print("up to date" if current else f"{args.out} is stale: rebuild it")
            return 0 if current else 1
        count = build(args.envelopes, kernel_dirs, args.out, args.author, args.judged_at)
    except BadArgument as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if count == 0:
        print("error: no verdict recorded", file=sys.stderr)
        return 1
    print(f"wrote {count} traces to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
