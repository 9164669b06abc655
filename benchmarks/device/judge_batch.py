"""Judge many candidates with ONE GpuJudge on this host's GPU (workload state and reference latencies built once
per problem), writing one JudgeResult envelope per candidate — the default protocol, exactly what
`ptxbench eval` would decide, faster than one process per kernel.

    python3 benchmarks/device/judge_batch.py --out DIR [--deadline-s 400] KERNEL.cu@PROBLEM ...
    python3 benchmarks/device/judge_batch.py --out DIR --replay-export DIR2      # every replay-turn kernel
                                                                              # (DIR2/<problem>/<name>.cu)

DIR/<problem>__<name>.json is the envelope (`ptxbench eval --json` layout) and DIR/kernels/<problem>__<name>.cu
the exact text judged (so verdicts can be recorded by kernel hash: tools/record_verdicts.py). A candidate
whose envelope already exists is skipped (re-running on a warm machine judges the rest); no new judgement starts
after --deadline-s. Prints one row per candidate and exits 0 (a bad kernel is a verdict, not a failure).
"""

from __future__ import annotations

import argparse
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))


def _targets(args: argparse.Namespace) -> list[tuple[Path, str]]:
    out = []
    for spec in args.kernels:
        path, _, problem = spec.rpartition("@")
        out.append((Path(path), problem))
    if args.replay_export:
        for kernel in sorted(Path(args.replay_export).glob("*/*.cu")):
            out.append((kernel, kernel.parent.name))
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("kernels", nargs="*", help="KERNEL.cu@PROBLEM")
    ap.add_argument("--out", required=True)
    ap.add_argument("--replay-export", default=None)
    ap.add_argument("--deadline-s", type=float, default=1e9)
    ap.add_argument("--prefix", default="", help="prefix of the envelope names (e.g. replay__)")
    args = ap.parse_args()

    from ptxcore.arch import get_architecture
    from ptxcore.gpu import JudgeConfig, gpu_available
    from ptxcore.gpu.pipeline.judge import GpuJudge
    from ptxcore.problems import get_problem
    from ptxcore.schema import text_sha256

    if not gpu_available():
        print("no GPU is available on this machine", file=sys.stderr)
        return 3
    out = Path(args.out)
    (out / "kernels").mkdir(parents=True, exist_ok=True)
    judge, arch, started = GpuJudge(JudgeConfig()), get_architecture("hopper"), time.monotonic()
    seen: dict[tuple[str, str], str] = {}  # (problem, kernel sha256) -> envelope name: one judgement per text
    for kept in sorted((out / "kernels").glob("*.cu")):  # envelopes of an earlier call (resumed)
        if (out / f"{kept.stem}.json").is_file():
            seen.setdefault((kept.stem.split("__", 1)[0].removeprefix(args.prefix), text_sha256(kept.read_text())),
                            kept.stem)
    for kernel, problem in _targets(args):
        name = f"{args.prefix}{problem}__{kernel.stem}"
        envelope = out / f"{name}.json"
        if envelope.exists():
            continue
        if time.monotonic() - started > args.deadline_s:
            print(f"{name:70s} not judged (deadline)", flush=True)
            continue
        source = kernel.read_text()
        key = (problem, text_sha256(source))
        if key in seen:  # the same text again (a replay turn that is a library kernel): the same verdict
            for suffix in (".json",):
                envelope.write_text((out / f"{seen[key]}{suffix}").read_text())
            for suffix in (".cu", ".judged_at"):
                (out / "kernels" / f"{name}{suffix}").write_text((out / "kernels" / f"{seen[key]}{suffix}").read_text())
            print(f"{name:70s} same text as {seen[key]}", flush=True)
            continue
        t0 = time.monotonic()
        r = judge.judge(source, get_problem(problem), arch)
        seen[key] = name
        (out / "kernels" / f"{name}.cu").write_text(source)
        (out / "kernels" / f"{name}.judged_at").write_text(datetime.now(UTC).isoformat(timespec="seconds"))
        envelope.write_text(r.model_dump_json(indent=1))
        perf = f"{r.performance.latency_ms:.4f} ms x{r.performance.speedup_factor:.3f}" if r.performance else ""
        print(f"{name:70s} {r.status.value:20s} {perf:22s} target={r.target_instruction.status.value} "
              f"({time.monotonic() - t0:.1f} s)", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
