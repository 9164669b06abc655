"""Why the attention-backward kernel is slower than cuDNN's: Nsight Compute on one call of each, side by side.

    python -m research.kernels.mha_bwd.profile_ncu --kernel solutions/mha_bwd_d128/wgmma_tma_ws.cu \\
        --problem mha_bwd_d128 --out DIR [--sections SpeedOfLight,Occupancy,...] [--metrics NAME,...]

Builds the candidate with the compile stage, then runs ncu twice, each time profiling every kernel launched in
the NVTX range `ptxbench_call` (one call, after warm-up calls), `--set full` (or the sections given):

- candidate: the judge's standalone child (`python -m ptxcore.gpu.child profile --library ...`), inputs from
  the problem's seed, `--calls 3` (the last one in the range);
- cuDNN: `python -m research.kernels.mha_bwd.cudnn_driver` (the judge's baseline on the same inputs).

Each report is kept (DIR/candidate.ncu-rep, DIR/cudnn.ncu-rep) and read back as CSV (details and raw pages,
DIR/<side>.details.csv, DIR/<side>.raw.csv); one table per side is printed and the rows go to DIR/profile.json.
A diagnostic, not a judgement: the kernels run outside the judge's sandbox, under kernel replay.
"""

from __future__ import annotations

import argparse
import json
import logging
import subprocess
import sys
from dataclasses import asdict
from pathlib import Path

from ptxcore.gpu.child.standalone import NVTX_RANGE
from research.kernels.mha_bwd.ncu_report import (
    KernelLaunch,
    format_table,
    merge,
    parse_details,
    parse_raw,
    summarize,
)

log = logging.getLogger(__name__)

REPO = Path(__file__).resolve().parents[3]
SECTIONS = ("SpeedOfLight", "ComputeWorkloadAnalysis", "MemoryWorkloadAnalysis", "Occupancy", "LaunchStats",
            "SchedulerStats", "WarpStateStats", "InstructionStats")
"""The sections that give the table (for --sections; the default is the full set, which has them all)."""
EXTRA_METRICS = ("sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active",)
"""Raw metrics collected on top of the sections: the GMMA pipe's utilization (Hopper)."""
CANDIDATE_CALLS = 3
CUDNN_WARMUP = 3
PAGES = ("details", "raw")


class ProfileError(RuntimeError):
    """An expected failure (no ncu, the build failed, ncu failed or profiled nothing): one line, no traceback."""


def candidate_argv(library: Path, problem: str, workload: str, seed: int, device: int,
                   calls: int = CANDIDATE_CALLS) -> list[str]:
    """The judge's profile child (ptxcore.gpu.child.main, mode profile): `calls` calls, the last in the range."""
    return [sys.executable, "-m", "ptxcore.gpu.child", "profile", "--library", str(library), "--problem", problem,
            "--workload", workload, "--seed", str(seed), "--device", str(device), "--calls", str(calls)]


def cudnn_argv(problem: str, workload: str, seed: int, device: int, warmup: int = CUDNN_WARMUP) -> list[str]:
    return [sys.executable, "-m", "research.kernels.mha_bwd.cudnn_driver", "--problem", problem,
            "--workload", workload, "--seed", str(seed), "--device", str(device), "--warmup", str(warmup)]


def ncu_profile_command(ncu: str, app: list[str], report: Path, sections: tuple[str, ...] = (),
                        metrics: tuple[str, ...] = EXTRA_METRICS) -> list[str]:
    """ncu over `app`: every kernel in the NVTX range (push/pop or start/end, as the judge's count includes),
    the full set or `sections`, the report exported to `report`. Clocks as they are (the judge's timing)."""
    what = [a for s in sections for a in ("--section", s)] if sections else ["--set", "full"]
    return [ncu, *what, *(["--metrics", ",".join(metrics)] if metrics else []),
            "--nvtx", "--nvtx-include", f"{NVTX_RANGE}/", "--nvtx-include", f"{NVTX_RANGE}]",
            "--clock-control", "none", "--export", str(report), "--force-overwrite", *app]


def ncu_import_command(ncu: str, report: Path, page: str) -> list[str]:
    """The report as CSV, values in base units (ns, byte)."""
    return [ncu, "--import", str(report), "--csv", "--page", page, "--print-units", "base"]


def _run(cmd: list[str], timeout_s: float, what: str) -> subprocess.CompletedProcess:
    log.info("%s: %s", what, " ".join(cmd))
    try:
        return subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired as exc:
        raise ProfileError(f"{what} timed out after {timeout_s:.0f} s") from exc
    except OSError as exc:
        raise ProfileError(f"{what} did not start: {exc}") from exc


def _why(proc: subprocess.CompletedProcess) -> str:
    lines = [ln for ln in (proc.stdout + proc.stderr).splitlines() if ln.strip()]
    errors = [ln for ln in lines if "==ERROR==" in ln]
    return (errors or lines or ["no output"])[0 if errors else -1].strip()[:300]


def profile_side(ncu: str, side: str, app: list[str], out: Path, timeout_s: float, sections: tuple[str, ...],
                 metrics: tuple[str, ...]) -> list[KernelLaunch]:
    """Profile `app` into out/<side>.ncu-rep and read its kernels back."""
    report = out / f"{side}.ncu-rep"
    report.unlink(missing_ok=True)  # a report left by an earlier run must not pass for this one's
    proc = _run(ncu_profile_command(ncu, app, report, sections, metrics), timeout_s, f"ncu on the {side}")
    (out / f"{side}.ncu.log").write_text(proc.stdout + "\n" + proc.stderr)
    if proc.returncode != 0 and metrics and "metric" in _why(proc).lower():
        log.warning("ncu refused the extra metrics (%s): profiling the %s without them", _why(proc), side)
        return profile_side(ncu, side, app, out, timeout_s, sections, ())
    if proc.returncode != 0:
        raise ProfileError(f"ncu on the {side} failed (exit {proc.returncode}): {_why(proc)} "
                           f"(log {out / f'{side}.ncu.log'})")
    if not report.is_file():
        raise ProfileError(f"ncu profiled no kernel of the {side} in the NVTX range {NVTX_RANGE}: {_why(proc)}")
    pages = {}
    for page in PAGES:
        got = _run(ncu_import_command(ncu, report, page), timeout_s, f"ncu --import {report.name} ({page})")
        if got.returncode != 0:
            raise ProfileError(f"ncu --import {report} --page {page} failed (exit {got.returncode}): {_why(got)}")
        (out / f"{side}.{page}.csv").write_text(got.stdout)
        pages[page] = got.stdout
    launches = merge(parse_details(pages["details"]), parse_raw(pages["raw"]))
    if not launches:
        raise ProfileError(f"the {side}'s report has no kernel (see {out / f'{side}.details.csv'})")
    return launches


def side_record(launches: list[KernelLaunch]) -> list[dict]:
    """JSON rows: the table's row, the full name and ID, and every metric as [unit, value]."""
    return [{**asdict(summarize(k)), "id": k.id, "full_name": k.name,
             "metrics": {n: [m.unit, m.value] for n, m in k.metrics.items()}} for k in launches]


def build(kernel: Path, arch_name: str) -> Path:
    """The candidate's shared object, built (or served from the cache) by the project's compile stage."""
    from ptxcore.arch import get_architecture
    from ptxcore.compile import BuildOptions, compile_candidate
    from ptxcore.sandbox import SandboxUnavailableError
    from ptxcore.schema import CompileStatus

    try:
        built = compile_candidate(kernel.read_text(), BuildOptions(arch=get_architecture(arch_name)))
    except SandboxUnavailableError as exc:
        raise ProfileError(f"cannot build {kernel}: {exc}") from exc
    res = built.result
    if res.status is not CompileStatus.COMPILED or built.artifact is None:
        raise ProfileError(f"{kernel} did not build: {res.status.value}: {res.reason or res.log[-200:]}")
    log.info("built %s (%s)", built.artifact, "cache hit" if res.cache_hit else f"{res.duration_s:.1f} s")
    return built.artifact


def profile(args: argparse.Namespace) -> int:
    from ptxcore.problems import get_problem
    from ptxcore.sass.tools import find_tool

    problem = get_problem(args.problem)
    workload = problem.workload(args.workload).uuid
    seed = problem.extension.seed if args.seed is None else args.seed
    ncu = find_tool("ncu")
    library = build(Path(args.kernel), args.arch)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    sections = tuple(s for s in args.sections.split(",") if s) if args.sections else ()
    metrics = tuple(m for m in args.metrics.split(",") if m)
    apps = {"candidate": candidate_argv(library, problem.name, workload, seed, args.device),
            "cudnn": cudnn_argv(problem.name, workload, seed, args.device)}
    sides = {side: profile_side(ncu, side, app, out, args.timeout_s, sections, metrics) for side, app in apps.items()}
    totals = {}
    for side, launches in sides.items():
        rows = [summarize(k) for k in launches]
        totals[side] = sum(r.duration_us or 0.0 for r in rows)
        print(format_table(f"== {side}: {problem.name} ({args.kernel if side == 'candidate' else 'cuDNN'})", rows))
        print()
    if totals["candidate"] > 0:
        print(f"cuDNN / candidate kernel time under ncu: {totals['cudnn'] / totals['candidate']:.3f}x")
    record = {"problem": problem.name, "kernel": args.kernel, "workload": workload, "seed": seed,
              "sections": list(sections) or "full", "metrics": list(metrics), "total_us": totals,
              "sides": {side: side_record(launches) for side, launches in sides.items()}}
    (out / "profile.json").write_text(json.dumps(record, indent=1))
    return 0


def main(argv: list[str] | None = None) -> int:
    from ptxcore.arch import UnknownArchitectureError
    from ptxcore.problems import ProblemNotFoundError
    from ptxcore.sass.tools import ToolNotFoundError

    ap = argparse.ArgumentParser(prog="profile_ncu", description=__doc__.split("\n", 1)[0])
    ap.add_argument("--kernel", required=True, help="the candidate's .cu")
    ap.add_argument("--problem", required=True)
    ap.add_argument("--out", required=True, help="directory for the reports, CSVs and profile.json")
    ap.add_argument("--arch", default="hopper")
    ap.add_argument("--workload", default=None, help="workload uuid (default: the problem's primary)")
    ap.add_argument("--seed", type=int, default=None, help="input seed (default: the problem's)")
    ap.add_argument("--device", type=int, default=0)
    ap.add_argument("--sections", default="", help=f"comma-separated sections instead of --set full, e.g. "
                    f"{','.join(SECTIONS)}")
    ap.add_argument("--metrics", default=",".join(EXTRA_METRICS), help="extra raw metrics ('' for none)")
    ap.add_argument("--timeout-s", type=float, default=240.0, help="limit of each ncu run")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="profile_ncu: %(message)s", stream=sys.stderr)
    try:
        return profile(args)
    except (ProfileError, ToolNotFoundError, ProblemNotFoundError, UnknownArchitectureError, OSError) as exc:
        print(f"profile_ncu: {exc}".replace("\n", " "), file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
