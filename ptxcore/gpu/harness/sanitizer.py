"""Memory-safety gate: compute-sanitizer memcheck around a standalone child call, in the candidate's sandbox.

The child generates its inputs with torch while PYTORCH_NO_CUDA_MEMORY_CACHING=1, so every tensor is its
own allocation and an out-of-bounds access inside what would otherwise be a cached block is seen.
Up to `max_runs` runs: a second only when the first was inconclusive (no error summary: the tool or the
process broke). Errors -> RUNTIME_ERROR with the report trimmed for feedback. A run in which the tool could not
see the candidate's process end ("couldn't find exit code": a process the candidate left running kept it
waiting) is the candidate's fault, never clean, whatever summary the tool printed.
"""

from __future__ import annotations

import logging
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

from ptxcore.gpu.errors import InfraError
from ptxcore.gpu.harness.toolrun import Prestarted, on_prestarted
from ptxcore.gpu.harness.triton import TritonFiles, candidate_args
from ptxcore.sandbox import SandboxStatus, SandboxUnavailableError
from ptxcore.sass.tools import find_tool

log = logging.getLogger(__name__)

ERROR_EXIT_CODE = 86
REPORT_LIMIT_CHARS = 3000
_SUMMARY = re.compile(r"=+\s*ERROR SUMMARY:\s*([\d,]+)\s+errors?")
_NO_EXIT = re.compile(r"couldn'?t find (?:the )?exit code", re.IGNORECASE)


class MemcheckOutcome(StrEnum):
    CLEAN = "clean"
    ERRORS = "errors"
    INCONCLUSIVE = "inconclusive"
    TIMEOUT = "timeout"
    MEMORY_LIMIT = "memory_limit"
    LEFT_RUNNING = "left_running"
    """The tool never saw the candidate's process tree end (a process it left running kept the tool waiting)."""


@dataclass(frozen=True)
class MemcheckRun:
    outcome: MemcheckOutcome
    errors: int
    report: str
    returncode: int | None
    duration_s: float


def parse_memcheck(text: str, returncode: int | None) -> tuple[MemcheckOutcome, int, str]:
    """Outcome, error count and trimmed report from memcheck's output."""
    m = _SUMMARY.search(text)
    report = trim_report(text)
    if _NO_EXIT.search(text):
        return MemcheckOutcome.LEFT_RUNNING, 0, report
    if m is None:
        return MemcheckOutcome.INCONCLUSIVE, 0, report
    errors = int(m.group(1).replace(",", ""))
    if errors > 0:
        return MemcheckOutcome.ERRORS, errors, report
    if returncode not in (0, None):
        return MemcheckOutcome.INCONCLUSIVE, 0, report
    return MemcheckOutcome.CLEAN, 0, report


def trim_report(text: str, limit: int = REPORT_LIMIT_CHARS) -> str:
    """The sanitizer's own lines (prefixed `=========`), local paths shortened, capped."""
    lines = [ln.rstrip() for ln in text.splitlines() if ln.startswith("=====")]
    lines = [re.sub(r"/\S*/(kernel\.cu)", r"\1", ln) for ln in lines]
    lines = [ln for ln in lines if "COMPUTE-SANITIZER" not in ln]
    out = "\n".join(lines)
    return out if len(out) <= limit else out[:limit] + f"\n... [{len(out) - limit} more characters trimmed]"


MEMCHECK_ENV = {"PYTORCH_NO_CUDA_MEMORY_CACHING": "1"}
"""The memcheck stage's environment: every tensor its own allocation (module docstring)."""


def memcheck_tool() -> list[str]:
    """compute-sanitizer memcheck with the gate's flags, before the child's command line."""
    return [find_tool("compute-sanitizer"), "--tool", "memcheck", "--error-exitcode", str(ERROR_EXIT_CODE),
            "--print-limit", "20", "--show-backtrace", "device"]


def memcheck_command(library: Path | TritonFiles, problem: str, workload: str, seed: int, device: int,
                     calls: int) -> list[str]:
    """`library`: the TVM-FFI build, or a Triton candidate's files (kernel.py + the session's cache)."""
    return [
        *memcheck_tool(), sys.executable, "-m", "ptxcore.gpu.child", "sanitize", *candidate_args(library),
        "--problem", problem, "--workload", workload, "--seed", str(seed), "--device", str(device),
        "--calls", str(calls),
    ]


def run_memcheck_once(candidate: Path | TritonFiles, argv: Callable[[Path | TritonFiles], list[str]],
                      timeout_s: float, prestarted: Prestarted | None = None) -> MemcheckRun:
    """One memcheck run in the candidate's sandbox; `argv(candidate as the sandbox sees it)` is the command, or
    `prestarted(timeout_s)` runs it on a memcheck process started before the candidate was known (prestart)."""
    from ptxcore.gpu.harness.confine import StageSandbox, outcome_returncode

    try:
        outcome = on_prestarted(prestarted, timeout_s)
        if outcome is None:
            with StageSandbox("memcheck", candidate, env=MEMCHECK_ENV) as stage:
                outcome = stage.run(argv(stage.candidate), timeout_s)
    except SandboxUnavailableError as exc:
        raise InfraError(f"memcheck not run: {exc}") from exc
    out = outcome.stdout + outcome.stderr
    if outcome.status is SandboxStatus.TIMED_OUT:
        return MemcheckRun(MemcheckOutcome.TIMEOUT, 0, trim_report(out), None, outcome.duration_s)
    if outcome.status is SandboxStatus.MEMORY_LIMIT:
        why = f"its processes held {outcome.resident_bytes / 2**30:.2f} GiB of resident memory, over the stage's limit"
        return MemcheckRun(MemcheckOutcome.MEMORY_LIMIT, 0, why + "\n" + trim_report(out), None, outcome.duration_s)
    code = outcome_returncode(outcome)
    verdict, errors, report = parse_memcheck(out, code)
    if verdict is MemcheckOutcome.INCONCLUSIVE:
        log.warning("memcheck inconclusive (rc %s): %s", code, out[-1500:])
    return MemcheckRun(verdict, errors, report, code, outcome.duration_s)


def run_memcheck(candidate: Path | TritonFiles, argv: Callable[[Path | TritonFiles], list[str]], timeout_s: float,
                 max_runs: int, prestarted: Prestarted | None = None) -> list[MemcheckRun]:
    """Run until a conclusive outcome (clean, errors, timeout) or `max_runs` runs; the first on `prestarted`
    when given, any further one in a fresh sandbox."""
    runs: list[MemcheckRun] = []
    for i in range(max_runs):
        run = run_memcheck_once(candidate, argv, timeout_s, prestarted if i == 0 else None)
        runs.append(run)
        if run.outcome is not MemcheckOutcome.INCONCLUSIVE:
            break
    return runs
