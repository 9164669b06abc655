"""Target-instruction execution: Nsight Compute per-instruction counts in an NVTX range around one call.

    ncu --replay-mode application --clock-control none --page source --print-source sass
        --metrics inst_executed,thread_inst_executed_true --nvtx --nvtx-include ptxbench_call/ ...

The source page lists every SASS instruction of each profiled kernel with the requested counters last
on the row. A family executed when the sum of thread_inst_executed_true over its rows (after the
architecture's exclusions: commit-closing dummy HGMMA, TMA prefetch) is positive. ncu failing or
profiling nothing -> `unknown`. Evidence is cached by source sha256 + cubin sha256.

Beyond the paper (issue 25) the evidence also keeps, from every row, the executed count per target SASS shape
(`target_ops`, for the work share: ptxcore.sass.work) and the kernels profiled in the counted call with their
launches (`profiled_kernels`, compared with the timed calls' CUPTI kernels: ptxcore.gpu.pipeline.kernelset).
Names are printed mangled (`--print-kernel-base mangled`), as CUPTI names kernels; the number of calls before
the counted one is drawn per run.
"""

from __future__ import annotations

import json
import logging
import re
import secrets
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from ptxcore.arch import Architecture
from ptxcore.gpu.child.standalone import NVTX_RANGE
from ptxcore.gpu.harness.toolrun import Prestarted, on_prestarted
from ptxcore.gpu.harness.triton import TritonFiles, candidate_args
from ptxcore.sandbox import SandboxStatus, SandboxUnavailableError
from ptxcore.sass.tools import find_tool
from ptxcore.sass.work import RAW_ROW_CAP, SassRow, target_ops
from ptxcore.schema import (
    ProfiledKernel,
    ProfileOutcome,
    StaticTarget,
    TargetInstruction,
    TargetInstructionEvidence,
)

log = logging.getLogger(__name__)

_ROW = re.compile(r"^\s*(0x[0-9a-fA-F]+)\s+(.*?)\s+([\d,]+)\s+([\d,]+)\s*$")
_KERNEL_HEADER = re.compile(
    r"^\s*(\S.*?)\s+\((\d+),\s*(\d+),\s*(\d+)\)x\((\d+),\s*(\d+),\s*(\d+)\),\s*Context"  # text layout
    r"|^Kernel Name\s+(\S.*?)\s*$"  # table layout (ncu 2025.3: the name wraps onto the next lines)
)
_CONTINUATION = re.compile(r"^\s+(\S.*?)\s*$")
MAX_RAW_ROWS = RAW_ROW_CAP
FAILED = ProfileOutcome.FAILED
PROFILED_CALLS = (2, 3, 4)
"""How many calls the profiled child makes (the last one is counted): drawn per run, so the counted call's index
tells a candidate nothing. ncu replays the whole application per pass; the draw is fixed for the run."""


@dataclass(frozen=True)
class NcuRow(SassRow):
    """A SASS row of ncu's source page, with the kernel it belongs to and its address."""

    function: str
    address: str


@dataclass(frozen=True)
class KernelHeader:
    """One profiled kernel launch as the source page introduces it."""

    name: str
    grid: tuple[int, int, int] | None = None
    block: tuple[int, int, int] | None = None


def parse_headers(text: str) -> list[KernelHeader]:
    """Every profiled launch, in order; a table-layout name that wraps is joined (pieces concatenated: the
    layout breaks names at the column width, mid-token)."""
    out: list[KernelHeader] = []
    wrapping = False
    for line in text.splitlines():
        h = _KERNEL_HEADER.match(line)
        if h and h.group(1):
            g = [int(x) for x in h.groups()[1:7]]
            out.append(KernelHeader(h.group(1), (g[0], g[1], g[2]), (g[3], g[4], g[5])))
            wrapping = False
        elif h:
            out.append(KernelHeader(h.group(8)))
            wrapping = True
        elif wrapping and (c := _CONTINUATION.match(line)) and not line.lstrip().startswith("-"):
            out[-1] = KernelHeader(out[-1].name + c.group(1))
        else:
            wrapping = False
    return out


def parse_source_page(text: str) -> tuple[list[NcuRow], list[str]]:
    """SASS rows with their two trailing counters, and the profiled kernels' names (one per launch)."""
    rows: list[NcuRow] = []
    headers = iter(parse_headers(text))
    kernels: list[str] = []
    function = ""
    for line in text.splitlines():
        if _KERNEL_HEADER.match(line):
            function = next(headers).name
            kernels.append(function)
            continue
        m = _ROW.match(line)
        if m:
            rows.append(NcuRow(text=m.group(2).strip(), inst_executed=int(m.group(3).replace(",", "")),
                               thread_inst_executed_true=int(m.group(4).replace(",", "")), function=function,
                               address=m.group(1)))
    return rows, kernels


def profiled_kernels(text: str) -> list[ProfiledKernel]:
    """Launches per kernel name in the profiled call, with the grid and block when every launch printed the same."""
    by_name: dict[str, list[KernelHeader]] = {}
    for h in parse_headers(text):
        by_name.setdefault(h.name, []).append(h)
    out = []
    for name, hs in sorted(by_name.items()):
        grids, blocks = {h.grid for h in hs}, {h.block for h in hs}
        out.append(ProfiledKernel(name=name, launches=len(hs), grid=grids.pop() if len(grids) == 1 else None,
                                  block=blocks.pop() if len(blocks) == 1 else None))
    return out


def family_counts(rows: list[NcuRow], arch: Architecture) -> tuple[dict[str, int], list[NcuRow]]:
    """Per family: sum of thread_inst_executed_true over counted rows; and the family rows (raw evidence)."""
    counts: dict[str, int] = {}
    matched: list[NcuRow] = []
    for row in rows:
        for fam in arch.all_families:
            verdict = fam.classify(row.opcode, row.text)
            if verdict is None:
                continue
            matched.append(row)
            if verdict == "counted":
                counts[fam.name] = counts.get(fam.name, 0) + row.thread_inst_executed_true
    return counts, matched


def evidence_from_text(text: str, arch: Architecture, returncode: int, tool: str) -> TargetInstructionEvidence:
    rows, kernels = parse_source_page(text)
    base = {"static": StaticTarget.PRESENT, "tool": tool}
    if returncode != 0 or "==ERROR==" in text:
        errs = [ln for ln in text.splitlines() if "==ERROR==" in ln][:3]
        return TargetInstructionEvidence(status=TargetInstruction.UNKNOWN, reason=(
            f"ncu failed (exit {returncode}): " + " | ".join(errs))[:500], profile=ProfileOutcome.FAILED, **base)
    if not kernels and not rows:
        return TargetInstructionEvidence(status=TargetInstruction.UNKNOWN, profile=ProfileOutcome.NOTHING_PROFILED,
                                         reason="ncu profiled no kernel in the NVTX range", **base)
    counts, matched = family_counts(rows, arch)
    required = [f.name for f in arch.target_families]
    executed = any(counts.get(name, 0) > 0 for name in required)
    raw = [{"function": r.function, "address": r.address, "sass": r.text, "inst_executed": r.inst_executed,
            "thread_inst_executed_true": r.thread_inst_executed_true} for r in matched[:MAX_RAW_ROWS]]
    return TargetInstructionEvidence(
        status=TargetInstruction.EXECUTED if executed else TargetInstruction.NOT_EXECUTED,
        family_thread_inst_executed={k: counts.get(k, 0) for k in sorted({*counts, *required})},
        raw_rows=raw, reason=f"profiled kernels: {', '.join(k[:80] for k in dict.fromkeys(kernels[:8]))}",
        target_ops=target_ops(rows, arch), profiled_kernels=profiled_kernels(text), profile=ProfileOutcome.COUNTED,
        **base,
    )


def drawn_calls() -> int:
    """How many calls a counting run makes (PROFILED_CALLS), drawn afresh."""
    return secrets.choice(PROFILED_CALLS)


def ncu_tool() -> list[str]:
    """ncu with the counting run's flags, before the child's command line."""
    return [
        find_tool("ncu"), "--replay-mode", "application", "--clock-control", "none",
        "--page", "source", "--print-source", "sass", "--print-kernel-base", "mangled",
        "--metrics", "inst_executed,thread_inst_executed_true",
        "--nvtx", "--nvtx-include", f"{NVTX_RANGE}/", "--nvtx-include", f"{NVTX_RANGE}]",
    ]


def ncu_command(library: Path | TritonFiles, problem: str, workload: str, seed: int, device: int,
                calls: int | None = None) -> list[str]:
    """`library`: the TVM-FFI build, or a Triton candidate's files (kernel.py + the session's cache). `calls`: how
    many calls the child makes, the last one counted (None: drawn from PROFILED_CALLS). Kernel names are printed
    mangled, as CUPTI names the timed calls' kernels (harness.kernelset compares the two)."""
    n = calls if calls is not None else drawn_calls()
    return [
        *ncu_tool(), sys.executable, "-m", "ptxcore.gpu.child", "profile", *candidate_args(library),
        "--problem", problem, "--workload", workload, "--seed", str(seed), "--device", str(device),
        "--calls", str(n),
    ]


def ncu_version() -> str:
    try:
        out = subprocess.run([find_tool("ncu"), "--version"], capture_output=True, text=True, timeout=60)
        m = re.search(r"Version\s+([\d.]+)", out.stdout)
        return f"ncu {m.group(1)}" if m else "ncu"
    except Exception:  # noqa: BLE001
        return "ncu"


class EvidenceCache:
    """JSON evidence per (source sha256, cubin sha256)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        root.mkdir(parents=True, exist_ok=True)

    VERSION = "v2"
    """v2: evidence carries per-shape counts and the profiled kernels (v1 entries are misses: re-profiled)."""

    def _path(self, source_sha: str, cubin_sha: str) -> Path:
        return self.root / f"{self.VERSION}-{source_sha[:32]}-{cubin_sha[:32]}.json"

    def load(self, source_sha: str, cubin_sha: str) -> TargetInstructionEvidence | None:
        """Verified evidence for this source and build, or None (a missing, tampered or stale entry)."""
        from ptxcore.gpu.harness.store import read_verified

        p = self._path(source_sha, cubin_sha)
        value = read_verified(p)
        if value is None:
            return None
        try:
            ev = TargetInstructionEvidence.model_validate(value)
        except ValueError as exc:
            log.warning("evidence %s is not valid (%s): removed", p, exc)
            p.unlink(missing_ok=True)
            return None
        if ev.source_sha256 != source_sha or ev.cubin_sha256 != cubin_sha:  # an entry moved under another key
            log.warning("evidence %s belongs to another build: removed", p)
            p.unlink(missing_ok=True)
            return None
        return ev

    def store(self, ev: TargetInstructionEvidence) -> None:
        from ptxcore.gpu.harness.store import write_verified

        if ev.status is TargetInstruction.UNKNOWN or not ev.source_sha256 or not ev.cubin_sha256:
            return  # failures are not cached: the next judgement tries again
        write_verified(self._path(ev.source_sha256, ev.cubin_sha256), ev.model_dump(mode="json"))


def profile_target(
    library: Path | TritonFiles, problem: str, workload: str, seed: int, device: int, arch: Architecture,
    timeout_s: float, raw_log: Path | None = None, kernel_names: list[str] | None = None,
    prestarted: Prestarted | None = None,
) -> TargetInstructionEvidence:
    """Run ncu once, in the candidate's sandbox; `unknown` evidence (never an exception) when it fails. `kernel_names`: profile only these
    kernels (a Triton candidate's launched kernels: `--kernel-name regex:^(...)$`). `prestarted(timeout_s)`: the
    run on an ncu process started before the candidate was known (ptxcore.gpu.harness.prestart)."""
    from ptxcore.gpu.harness.confine import StageSandbox, outcome_returncode

    def argv(inside: Path | TritonFiles) -> list[str]:
        cmd = ncu_command(inside, problem, workload, seed, device)
        if kernel_names:
            from ptxcore.triton.evidence import with_kernel_filter

            cmd = with_kernel_filter(cmd, kernel_names)
        return cmd

    try:
        outcome = on_prestarted(prestarted, timeout_s)
        if outcome is None:
            with StageSandbox("ncu", library) as stage:
                outcome = stage.run(argv(stage.candidate), timeout_s)
    except SandboxUnavailableError as exc:
        return TargetInstructionEvidence(status=TargetInstruction.UNKNOWN, static=StaticTarget.PRESENT,
                                         profile=FAILED, tool="ncu", reason=f"ncu not run: {exc}"[:500])
    if outcome.status is SandboxStatus.TIMED_OUT:
        return TargetInstructionEvidence(status=TargetInstruction.UNKNOWN, static=StaticTarget.PRESENT,
                                         profile=FAILED, tool="ncu", reason=f"ncu timed out after {timeout_s:.0f} s")
    if outcome.status is SandboxStatus.MEMORY_LIMIT:
        return TargetInstructionEvidence(status=TargetInstruction.UNKNOWN, static=StaticTarget.PRESENT,
                                         profile=FAILED, tool="ncu", reason=f"ncu killed at "
                                         f"{outcome.resident_bytes / 2**30:.1f} GiB of resident memory (the stage's limit)")
    text = outcome.stdout + "\n" + outcome.stderr
    if raw_log is not None:
        raw_log.write_text(text)
    code = outcome_returncode(outcome)
    log.info("ncu rc=%s, %d chars", code, len(text))
    return evidence_from_text(text, arch, code, ncu_version())


def dump_evidence(ev: TargetInstructionEvidence) -> str:
    return json.dumps(ev.model_dump(mode="json"), indent=1)
