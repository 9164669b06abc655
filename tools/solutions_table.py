"""Turn the `ptxbench eval --json` envelopes written by tools/run_solutions.sh into solutions/README.md's tables.

    python tools/solutions_table.py OUT_DIR                                  # print the tables
    python tools/solutions_table.py OUT_DIR --readme solutions/README.md     # replace the marked section

Reads OUT_DIR/<problem>__<kernel>.json (library kernels) and OUT_DIR/replay__<problem>__turn<i>_<EXPECTED>.json
(replay turns, when present). Only numbers found in the envelopes are printed; a missing envelope is
reported as such, never filled in.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SOLUTIONS = REPO / "solutions"
BEGIN, END = "<!-- results:begin -->", "<!-- results:end -->"


def _fmt(x: float | None, spec: str) -> str:
    return format(x, spec) if x is not None else "–"


def load_envelope(path: Path) -> dict | str:
    """The envelope at `path`, or why there is none to read ("no result", or an empty or unreadable file: an
    eval cut off by its stage's time limit leaves an empty one)."""
    if not path.is_file():
        return "no result"
    text = path.read_text()
    if not text.strip():
        return "no envelope (empty file: the eval was cut off)"
    try:
        envelope = json.loads(text)
    except json.JSONDecodeError:
        return "no envelope (not JSON)"
    return envelope if isinstance(envelope, dict) and "status" in envelope else "no envelope (not a verdict)"


def _work(tgt: dict) -> str:
    """The target path's share of the problem's FLOPs and whether it carries the work (issue 25)."""
    work = tgt.get("work")
    if not work:
        return "–"
    share = work.get("flops_share")
    return f"{_fmt(share, '.2f')} ({work.get('carries', '?')})"


def library_rows(out: Path) -> list[list[str]]:
    rows = []
    for kernel in sorted(SOLUTIONS.glob("*/*.cu")):
        problem, name = kernel.parent.name, kernel.stem
        r = load_envelope(out / f"{problem}__{name}.json")
        if isinstance(r, str):
            rows.append([problem, f"`{name}.cu`", r, "–", "–", "–", "–", "–", "–"])
            continue
        perf, corr, tgt = r.get("performance"), r.get("correctness"), r["target_instruction"]
        fams = ", ".join(f"{k} {v:,}" for k, v in sorted(tgt.get("family_thread_inst_executed", {}).items()))
        target = f"{tgt['status']} (static {tgt.get('static') or 'n/a'}{'; ' + fams if fams else ''})"
        rows.append(
            [
                problem,
                f"`{name}.cu`",
                r["status"],
                _fmt(perf and perf["latency_ms"], ".4f"),
                _fmt(perf and perf["reference_latency_ms"], ".4f"),
                _fmt(perf and perf["speedup_factor"], ".3f"),
                target,
                _work(tgt),
                _fmt(corr and corr.get("max_absolute_error"), ".3g"),
            ]
        )
    return rows


def _baseline(problem: str, envelopes: list[dict]) -> str:
    """The problem's baseline library, with the version an envelope recorded (when one did)."""
    sys.path.insert(0, str(REPO))
    from ptxcore.problems import get_problem

    library = get_problem(problem).extension.baseline.library.value
    for r in envelopes:
        versions = (r.get("environment") or {}).get("library_versions") or {}
        version = versions.get(f"baseline:{library}")
        if version:
            return f"{library} {version}"
    return f"{library} (version not recorded)"


def problem_rows(out: Path) -> list[list[str]]:
    """One row per problem: its baseline, reference latency and the best of our kernels (fastest PASSED, else
    the first verdict found)."""
    rows = []
    for folder in sorted(p for p in SOLUTIONS.iterdir() if p.is_dir() and any(p.glob("*.cu"))):
        problem = folder.name
        loaded = {k.stem: load_envelope(out / f"{problem}__{k.stem}.json") for k in sorted(folder.glob("*.cu"))}
        found = {name: r for name, r in loaded.items() if isinstance(r, dict)}
        if not found:
            rows.append([problem, _baseline(problem, []), "–", "no result", "–", "–", "–"])
            continue
        passed = {k: r for k, r in found.items() if r["status"] == "PASSED" and r.get("performance")}
        name, best = (max(passed.items(), key=lambda kv: kv[1]["performance"]["speedup_factor"]) if passed
                      else next(iter(found.items())))
        refs = [r["performance"]["reference_latency_ms"] for r in found.values() if r.get("performance")]
        perf = best.get("performance")
        rows.append([problem, _baseline(problem, list(found.values())), _fmt(refs[0] if refs else None, ".4f"),
                     f"`{name}.cu`", best["status"], _fmt(perf and perf["speedup_factor"], ".3f"),
                     best["target_instruction"]["status"]])
    return rows


def replay_rows(out: Path) -> list[list[str]]:
    rows = []
    for path in sorted(out.glob("replay__*.json")):
        _, problem, turn = path.stem.split("__")
        index, expected = turn.split("_", 1)
        r = load_envelope(path)
        got = r["status"] if isinstance(r, dict) else r
        rows.append(
            [problem, index.removeprefix("turn"), expected, got, "yes" if got == expected else "**no**"]
        )
    return rows


def environment_line(out: Path) -> str:
    for path in sorted(out.glob("*.json")):
        r = load_envelope(path)
        env = (r.get("environment") or {}) if isinstance(r, dict) else {}
        if env.get("gpu_name"):
            return (
                f"Measured on {env['gpu_name']}, driver {env.get('driver_version', '?')}, "
                f"CUDA {env.get('cuda_toolkit', '?')} with `ptxbench eval` (defaults of docs/architecture.md)."
            )
    return "No GPU envelope found: these are not measurements."


def markdown(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def render(out: Path) -> str:
    parts = [
        environment_line(out),
        "",
        "Per problem (our best kernel: the fastest PASSED one, else the first verdict):",
        "",
        markdown(["Problem", "Baseline", "Reference (ms)", "Best kernel", "Verdict", "Speedup", "Target"],
                 problem_rows(out)),
        "",
        "Every kernel:",
        "",
        markdown(
            [
                "Problem",
                "Kernel",
                "Verdict",
                "Latency (ms)",
                "Reference (ms)",
                "Speedup",
                "Target instructions",
                "Work share",
                "Max abs err",
            ],
            library_rows(out),
        ),
    ]
    replay = replay_rows(out)
    if replay:
        parts += [
            "",
            "Replay trajectories (replay/demo), verdict per turn:",
            "",
            markdown(["Problem", "Turn", "Written to earn", "Judged", "Match"], replay),
        ]
    return "\n".join(parts)


def replace_section(readme: Path, body: str) -> None:
    text = readme.read_text()
    if BEGIN not in text or END not in text:
        raise SystemExit(f"{readme}: markers {BEGIN} / {END} not found")
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    readme.write_text(f"{head}{BEGIN}\n{body}\n{END}{tail}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out_dir", type=Path)
    parser.add_argument("--readme", type=Path, help="replace the section between the result markers")
    args = parser.parse_args(argv)
    if not args.out_dir.is_dir():
        print(f"error: {args.out_dir} is not a directory", file=sys.stderr)
        return 2
    body = render(args.out_dir)
    if args.readme:
        replace_section(args.readme, body)
        print(f"updated {args.readme}")
    else:
        print(body)
    return 0


if __name__ == "__main__":
    import signal

    signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # `make_table.py DIR | head` ends quietly
    sys.exit(main())
