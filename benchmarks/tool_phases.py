"""Where the tool pair's time goes (issue 27): memcheck 5.2-5.9 s and ncu 6.5-8.7 s of a GEMM judgement on the
H200, which with the build is the judge's critical path, while the candidate's calls themselves take milliseconds.

    python benchmarks/tool_phases.py [KERNEL.cu] [--problem gemm_n7168_k5120] [--repeats 3] [--json OUT]

Each arm runs `--repeats` times, in the candidate's stage sandbox with the commands the judge builds
(`memcheck_command`, `ncu_command`), one after another on an otherwise idle GPU:

  interpreter     python -c pass
  imports         the child's imports (torch, tvm_ffi, the standalone child and the workload generator)
  cuda            the imports, then a CUDA context and one synchronised allocation
  child           the memcheck child without the tool (inputs drawn, the module loaded, its calls made)
  memcheck        the child under compute-sanitizer memcheck, as the judge runs it
  ncu             the child under ncu (2 calls, the last one counted), as the judge runs it
  memcheck | ncu  both at once, as the judge overlaps them (one wall time)
  prestarted memcheck, prestarted ncu, prestarted pair
                  the judge's runs started before the candidate (harness.prestart), given PRESTART_LEAD_S to
                  import, then timed from the request to the end (the pair: both at once)
  memcheck: imports, memcheck: cuda, ncu: imports, ncu: cuda
                  the imports (then the CUDA context) under each tool with the judge's flags: what a tool
                  process started before its candidate is known (nothing on the GPU yet) would already have
                  done, and what its CUDA context costs under the tool

The table gives each arm's median, least and most seconds, then the differences between medians that split the
pair's time: the interpreter, the imports, the CUDA context, the child's own work, and each tool's own cost
beyond the child. Needs a GPU (exit 3 without one); builds the kernel first (the compile cache serves a prebuilt
one).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ptxcore.sandbox.models import SandboxOutcome

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

DEFAULT_KERNEL = REPO / "solutions" / "gemm_n7168_k5120" / "wgmma_tma_ws.cu"
IMPORTS = "import torch, tvm_ffi; import ptxcore.gpu.child.standalone, ptxcore.gpu.harness.workloads"
CUDA = IMPORTS + "; torch.zeros(1, device='cuda'); torch.cuda.synchronize()"
ARMS = ("interpreter", "imports", "cuda", "child", "memcheck", "ncu", "memcheck | ncu",
        "prestarted memcheck", "prestarted ncu", "prestarted pair",
        "memcheck: imports", "memcheck: cuda", "ncu: imports", "ncu: cuda")
SPLITS = (
    ("interpreter start", "interpreter", None),
    ("the child's imports", "imports", "interpreter"),
    ("CUDA context", "cuda", "imports"),
    ("inputs, module load, calls", "child", "cuda"),
    ("memcheck's own cost", "memcheck", "child"),
    ("ncu's own cost", "ncu", "child"),
    ("the pair beyond the longer tool", "memcheck | ncu", "ncu"),
    ("memcheck's start (tool, interpreter, imports)", "memcheck: imports", None),
    ("memcheck's CUDA context", "memcheck: cuda", "memcheck: imports"),
    ("memcheck after its CUDA context", "memcheck", "memcheck: cuda"),
    ("ncu's start (tool, interpreter, imports)", "ncu: imports", None),
    ("ncu's CUDA context", "ncu: cuda", "ncu: imports"),
    ("ncu after its CUDA context", "ncu", "ncu: cuda"),
    ("the pair, prestarted against fresh", "prestarted pair", "memcheck | ncu"),
)
"""(label, arm, minus arm): the differences of medians that split the pair's time."""


@dataclass(frozen=True)
class Run:
    arm: str
    seconds: float
    ok: bool
    note: str = ""


def summary(runs: Sequence[Run]) -> dict[str, dict[str, float | int]]:
    """Per arm: n, failed, median, min, max seconds (successful runs only)."""
    out: dict[str, dict[str, float | int]] = {}
    for arm in ARMS:
        good = [r.seconds for r in runs if r.arm == arm and r.ok]
        bad = sum(1 for r in runs if r.arm == arm and not r.ok)
        if good or bad:
            out[arm] = {"n": len(good), "failed": bad,
                        **({"median": statistics.median(good), "min": min(good), "max": max(good)} if good else {})}
    return out


def splits(stats: dict[str, dict[str, float | int]]) -> list[tuple[str, float]]:
    """The differences of medians; a split whose arms did not both succeed is left out."""
    rows = []
    for label, arm, minus in SPLITS:
        a = stats.get(arm, {}).get("median")
        b = stats.get(minus, {}).get("median") if minus else 0.0
        if a is not None and b is not None:
            rows.append((label, float(a) - float(b)))
    return rows


def render(stats: dict[str, dict[str, float | int]]) -> str:
    lines = ["| arm | n | failed | median s | min s | max s |", "|---|---|---|---|---|---|"]
    for arm, s in stats.items():
        cells = [f"{s[k]:.2f}" if k in s else "-" for k in ("median", "min", "max")]
        lines.append(f"| {arm} | {s['n']} | {s['failed']} | " + " | ".join(cells) + " |")
    lines += ["", "| split | s |", "|---|---|"]
    lines += [f"| {label} | {sec:.2f} |" for label, sec in splits(stats)]
    return "\n".join(lines)


def _timed(arm: str, stage: str, library: Path, argv: Callable[[Path], list[str]], timeout_s: float,
           accept: Callable[[SandboxOutcome], bool]) -> Run:
    from ptxcore.gpu.harness.confine import StageSandbox

    env = {"PYTORCH_NO_CUDA_MEMORY_CACHING": "1"} if stage == "memcheck" else None
    with StageSandbox(stage, library, env=env) as box:
        cmd = argv(box.candidate)  # type: ignore[arg-type]  # a built library: a path inside
        t0 = time.monotonic()
        outcome = box.run(cmd, timeout_s)
        seconds = time.monotonic() - t0
    ok = accept(outcome)
    note = "" if ok else f"{outcome.status.value} exit {outcome.exit_code}: {(outcome.stderr or outcome.stdout)[-200:]}"
    return Run(arm, seconds, ok, note)


PRESTART_LEAD_S = 8.0
"""How long a prestarted run is given to import before its request (the judge's lead: a build, or the gap
between candidates)."""


def _prestarted(stages: tuple[str, ...], library: Path, requests: dict[str, dict], timeout_s: float,
                accept: dict[str, Callable[[SandboxOutcome], bool]]) -> Run:
    """The judge's prestarted runs of `stages`, their request written after PRESTART_LEAD_S; seconds from the
    requests to the last end."""
    from ptxcore.gpu.harness.prestart import WaitingRun

    runs = [WaitingRun(stage) for stage in stages]
    try:
        time.sleep(PRESTART_LEAD_S)
        t0 = time.monotonic()
        with ThreadPoolExecutor(max_workers=len(runs)) as pool:
            outs = list(pool.map(lambda r: r.go(library, requests[r.stage], timeout_s), runs))
        seconds = time.monotonic() - t0
    finally:
        for r in runs:
            r.close()
    bad = [f"{r.stage}: {o.status.value} exit {o.exit_code}: {(o.stderr or o.stdout)[-200:]}"
           for r, o in zip(runs, outs, strict=True) if not accept[r.stage](o)]
    arm = "prestarted pair" if len(stages) > 1 else f"prestarted {stages[0]}"
    return Run(arm, seconds, not bad, "; ".join(bad))


def measure(library: Path, problem: str, workload: str, seed: int, device: int, repeats: int,
            timeout_s: float = 300.0) -> list[Run]:
    from ptxcore.gpu.harness.ncu import ncu_command
    from ptxcore.gpu.harness.sanitizer import memcheck_command

    def sanitize(inside: Path) -> list[str]:
        return memcheck_command(inside, problem, workload, seed, device, 1)

    def child(inside: Path) -> list[str]:
        cmd = sanitize(inside)
        return cmd[cmd.index(sys.executable):]  # the same child, without the tool in front

    def profile(inside: Path) -> list[str]:
        return ncu_command(inside, problem, workload, seed, device, calls=2)

    def under(tool: Callable[[Path], list[str]], code: str) -> Callable[[Path], list[str]]:
        def argv(inside: Path) -> list[str]:
            cmd = tool(inside)
            return [*cmd[:cmd.index(sys.executable)], sys.executable, "-c", code]
        return argv

    def exit0(o: SandboxOutcome) -> bool:  # memcheck exits non-zero when it found an error
        return o.exit_code == 0

    def counted(o: SandboxOutcome) -> bool:
        return exit0(o) and "Kernel Name" in o.stdout + o.stderr

    arms: list[tuple[str, str, Callable[[Path], list[str]], Callable[[SandboxOutcome], bool]]] = [
        ("interpreter", "memcheck", lambda _p: [sys.executable, "-c", "pass"], exit0),
        ("imports", "memcheck", lambda _p: [sys.executable, "-c", IMPORTS], exit0),
        ("cuda", "memcheck", lambda _p: [sys.executable, "-c", CUDA], exit0),
        ("child", "memcheck", child, exit0),
        ("memcheck", "memcheck", sanitize, exit0),
        ("ncu", "ncu", profile, counted),
        ("memcheck: imports", "memcheck", under(sanitize, IMPORTS), exit0),
        ("memcheck: cuda", "memcheck", under(sanitize, CUDA), exit0),
        ("ncu: imports", "ncu", under(profile, IMPORTS), exit0),
        ("ncu: cuda", "ncu", under(profile, CUDA), exit0),
    ]
    runs: list[Run] = []
    for i in range(repeats):
        for arm, stage, argv, accept in arms:
            runs.append(_timed(arm, stage, library, argv, timeout_s, accept))
            print(f"repeat {i + 1}/{repeats} {arm}: {runs[-1].seconds:.2f} s{'' if runs[-1].ok else ' FAILED'}",
                  file=sys.stderr, flush=True)
        requests = {"memcheck": {"problem": problem, "workload": workload, "seed": seed, "device": device,
                                 "calls": 1},
                    "ncu": {"problem": problem, "workload": workload, "seed": seed, "device": device, "calls": 2}}
        accept = {"memcheck": exit0, "ncu": counted}
        for stages in (("memcheck",), ("ncu",), ("memcheck", "ncu")):
            runs.append(_prestarted(stages, library, requests, timeout_s, accept))
            print(f"repeat {i + 1}/{repeats} {runs[-1].arm}: {runs[-1].seconds:.2f} s"
                  f"{'' if runs[-1].ok else ' FAILED'}", file=sys.stderr, flush=True)
        t0 = time.monotonic()
        with ThreadPoolExecutor(max_workers=2) as pool:
            both = [pool.submit(_timed, "memcheck", "memcheck", library, sanitize, timeout_s, exit0),
                    pool.submit(_timed, "ncu", "ncu", library, profile, timeout_s, counted)]
            ok = all(f.result().ok for f in both)
        runs.append(Run("memcheck | ncu", time.monotonic() - t0, ok))
        print(f"repeat {i + 1}/{repeats} memcheck | ncu: {runs[-1].seconds:.2f} s", file=sys.stderr, flush=True)
    return runs


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("kernel", nargs="?", default=str(DEFAULT_KERNEL))
    ap.add_argument("--problem", default="gemm_n7168_k5120")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--json", default=None)
    args = ap.parse_args()

    from ptxcore.arch import get_architecture
    from ptxcore.compile import BuildOptions, CompileCache, compile_candidate
    from ptxcore.gpu import JudgeConfig, gpu_available
    from ptxcore.gpu.pipeline.tools import TOOL_SEED_OFFSET
    from ptxcore.problems import get_problem

    if not gpu_available():
        print("no GPU is available on this machine: the tool-phase benchmark needs one", file=sys.stderr)
        return 3
    if args.repeats < 1:
        print(f"--repeats must be at least 1, not {args.repeats}", file=sys.stderr)
        return 2
    if not Path(args.kernel).is_file():
        print(f"{args.kernel}: no such kernel file", file=sys.stderr)
        return 2
    config = JudgeConfig()
    problem = get_problem(args.problem)
    built = compile_candidate(Path(args.kernel).read_text(), BuildOptions(get_architecture("hopper")),
                              CompileCache(config.cache_root() / "compile"))
    if built.result.status.value != "COMPILED" or built.artifact is None:
        print(f"{args.kernel}: {built.result.status.value} {built.result.reason}", file=sys.stderr)
        return 1
    runs = measure(built.artifact, problem.name, problem.workload().uuid, problem.extension.seed + TOOL_SEED_OFFSET,
                   config.device, args.repeats)
    stats = summary(runs)
    print(f"kernel: {Path(args.kernel).name}  problem: {problem.name}  repeats: {args.repeats}")
    print(render(stats))
    for r in runs:
        if not r.ok:
            print(f"failed: {r.arm}: {r.note}", file=sys.stderr)
    if args.json:
        Path(args.json).write_text(json.dumps({"kernel": args.kernel, "problem": problem.name, "stats": stats,
                                               "splits": splits(stats), "runs": [r.__dict__ for r in runs]},
                                              indent=2))
    return 0 if all(r.ok for r in runs) else 1


if __name__ == "__main__":
    sys.exit(main())
