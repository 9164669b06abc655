"""Target work from SASS instruction shapes and executed counts (pure: Nsight Compute's rows come in as data).

What the SASS tells, per target family:
- **GMMA** (Hopper wgmma): the opcode names the shape, `HGMMA.64x256x16.F32.BF16` = one warpgroup instruction of
  2*64*256*16 FLOPs. ncu's `thread_inst_executed_true` counts it once per active thread, 128 per warpgroup
  instruction, so FLOPs = thread count * 2*M*N*K / 128 (exact). A `.SP` (sparse) shape does half the MACs its K
  names. The commit-closing dummy `HGMMA ... RZ, gdesc[URZ]` is excluded by the family (no work).
- **tcgen05** (Blackwell UTCHMMA / UTCQMMA / UTCIMMA / UTCOMMA): M and N live in the runtime instruction descriptor
  (`idesc[URx]`), not in the opcode, so only an upper bound is known: 2 * M_max * 256 * K(kind), M_max 256 for
  `.2CTA` (a CTA pair) else 128, K from the PTX ISA's kinds (f16/bf16 16, f8f6f4 and i8 32, mxf4 64), doubled for
  sparse. One elected thread issues an MMA; issues are bounded by the larger of the warp and the thread count.
  Other tcgen05 instructions (UTCBAR, LDTM, STTM, UTCCP, ...) move or fence data and carry no FLOPs. Static only:
  no Blackwell GPU has run this.
- **TMA** (UTMALDG / UTMASTG / UTMAREDG): the box size is in the CUtensorMap the host code encodes, not in the
  SASS, so the bytes moved are unknown; each transfer (one per executing thread) moves at most one box, and a box
  must fit the shared memory of one CTA (the registry's max_tma_box_bytes), times 16 for a `.MULTICAST` load (a
  cluster's CTAs). That bound can prove a TMA path does *not* carry the problem's bytes; it cannot prove it does.

The verdict (`share_verdict`): the target carries the work when a known share reaches the threshold; it does not
when every target family's share, or its upper bound, is below it; otherwise unknown.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Protocol

from ptxcore.arch import Architecture
from ptxcore.schema import (
    TargetInstruction,
    TargetInstructionEvidence,
    TargetOpCount,
    TargetWork,
    TargetWorkShare,
)

RAW_ROW_CAP = 200
"""Family rows an evidence record keeps in `raw_rows` (ptxcore.gpu.harness.ncu); a record with fewer kept them all."""
WARPGROUP_THREADS = 128
"""Threads that execute one warpgroup (wgmma) instruction."""
MULTICAST_CTAS = 16
"""Largest cluster a multicast TMA load can deliver to (non-portable cluster size)."""
_GMMA = re.compile(r"^[HQIB]GMMA\.(?P<m>\d+)x(?P<n>\d+)x(?P<k>\d+)(?P<rest>(\.[A-Za-z0-9_]+)*)$")
_TC_MMA = re.compile(r"^UTC(?P<kind>[HQIO])MMA(?P<rest>(\.[A-Za-z0-9_]+)*)$")
_TC_K = {"H": 16, "Q": 32, "I": 32, "O": 64}
"""K of one tcgen05 MMA by SASS kind: H = kind::f16 (tf32: 8), Q = f8f6f4 / mxf8f6f4, I = i8, O = mxf4."""
_TC_N_MAX = 256
_PRED = re.compile(r"^@!?U?P[T\d]+\s+")


def sass_opcode(text: str) -> str:
    """The opcode token of one SASS line, its predicate (@P0, @!UPT, ...) and trailing ';' removed."""
    body = _PRED.sub("", text.strip())
    return body.split(None, 1)[0].rstrip(";") if body else ""


class ExecutedRow(Protocol):
    """One SASS row with ncu's counters (ptxcore.gpu.harness.ncu.NcuRow)."""

    @property
    def opcode(self) -> str: ...

    text: str
    inst_executed: int
    thread_inst_executed_true: int


def _has(rest: str, token: str) -> bool:
    return token in rest.split(".")


def shape_flops(opcode: str) -> tuple[int | None, int | None]:
    """(exact FLOPs, upper bound) of one tensor instruction; (None, None) for a non-MMA opcode."""
    g = _GMMA.match(opcode)
    if g:
        flops = 2 * int(g["m"]) * int(g["n"]) * int(g["k"])
        flops //= 2 if _has(g["rest"], "SP") else 1
        return flops, flops
    t = _TC_MMA.match(opcode)
    if t:
        m_max = 256 if _has(t["rest"], "2CTA") else 128
        k = _TC_K[t["kind"]] * (2 if _has(t["rest"], "SP") else 1)
        return None, 2 * m_max * _TC_N_MAX * k
    return None, None


def _count(row: ExecutedRow, family: str, opcode: str) -> int:
    if family == "gmma":
        return -(-row.thread_inst_executed_true // WARPGROUP_THREADS)
    if family == "tma":
        return row.thread_inst_executed_true
    return max(row.inst_executed, row.thread_inst_executed_true)


def _op(family: str, opcode: str, n: int, arch: Architecture) -> TargetOpCount | None:
    if family == "tma":
        box = arch.max_tma_box_bytes * (MULTICAST_CTAS if ".MULTICAST" in opcode else 1)
        return TargetOpCount(family=family, opcode=opcode, instructions=n, bytes_bound_per_instruction=box or None)
    exact, bound = shape_flops(opcode)
    if bound is None:
        return None  # a tcgen05 data-movement or fence instruction: no FLOPs
    return TargetOpCount(family=family, opcode=opcode, instructions=n, flops_per_instruction=exact,
                         flops_bound_per_instruction=bound)


def target_ops(rows: Iterable[ExecutedRow], arch: Architecture) -> list[TargetOpCount]:
    """Per (target family, opcode): instructions the profiled call executed (excluded rows left out)."""
    counts: dict[tuple[str, str], int] = {}
    for row in rows:
        for fam in arch.target_families:
            if fam.classify(row.opcode, row.text) == "counted":
                key = (fam.name, row.opcode)
                counts[key] = counts.get(key, 0) + _count(row, fam.name, row.opcode)
    ops = [_op(family, opcode, n, arch) for (family, opcode), n in sorted(counts.items())]
    return [op for op in ops if op is not None]


def carry_threshold(arch: Architecture, problem_threshold: float | None = None) -> float:
    """The problem's own threshold when its extension sets one, else the architecture's."""
    return problem_threshold if problem_threshold is not None else arch.carry_threshold


def _flops(ops: list[TargetOpCount]) -> tuple[int | None, int]:
    mma = [o for o in ops if o.flops_bound_per_instruction is not None]
    exact = None if any(o.flops_per_instruction is None for o in mma) else sum(
        o.instructions * (o.flops_per_instruction or 0) for o in mma)
    return exact, sum(o.instructions * (o.flops_bound_per_instruction or 0) for o in mma)


def share_verdict(ops: list[TargetOpCount], problem_flops: int, problem_min_bytes: int, arch: Architecture,
                  threshold: float) -> TargetWorkShare:
    """The work share of the profiled call's target instructions and the carries verdict."""
    exact, bound = _flops(ops)
    tma = [o for o in ops if o.family == "tma"]
    n_tma = sum(o.instructions for o in tma)
    tma_bound = sum(o.instructions * (o.bytes_bound_per_instruction or 0) for o in tma) if tma else None
    share = exact / problem_flops if exact is not None and problem_flops else None
    flops_t = f"{threshold:g} of {problem_flops:,} FLOPs"
    if share is not None and share >= threshold:
        verdict, why = TargetWork.CARRIES, f"target FLOPs {exact:,} = {share:.3g} of the problem's (threshold {threshold:g})"
    else:
        verdict, why = _below(share, exact, bound, problem_flops, threshold, flops_t)
        if verdict is TargetWork.DOES_NOT_CARRY and "tma" in {f.name for f in arch.target_families} and n_tma:
            verdict, why = _tma(n_tma, tma_bound, problem_min_bytes, threshold, why)
    return TargetWorkShare(problem_flops=problem_flops, problem_min_bytes=problem_min_bytes, target_flops=exact,
                           target_flops_bound=bound, flops_share=share, tma_instructions=n_tma, tma_bytes_bound=tma_bound,
                           threshold=threshold, carries=verdict, reason=why)


def _below(share: float | None, exact: int | None, bound: int, problem_flops: int, threshold: float,
           flops_t: str) -> tuple[TargetWork, str]:
    if share is not None:
        return TargetWork.DOES_NOT_CARRY, f"target FLOPs {exact:,} = {share:.3g} of the problem's, below {flops_t}"
    if problem_flops and bound / problem_flops < threshold:
        return TargetWork.DOES_NOT_CARRY, (f"target FLOPs at most {bound:,} = {bound / problem_flops:.3g} of the "
                                           f"problem's, below {flops_t}")
    return TargetWork.UNKNOWN, (f"target FLOPs at most {bound:,} (the MMA shapes are in the runtime instruction "
                                f"descriptor, not the SASS): cannot tell whether they reach {flops_t}")


def _tma(n: int, bound: int | None, min_bytes: int, threshold: float, flops_why: str) -> tuple[TargetWork, str]:
    if bound is not None and min_bytes and bound / min_bytes < threshold:
        return TargetWork.DOES_NOT_CARRY, (f"{flops_why}; {n:,} TMA transfers move at most {bound:,} bytes = "
                                           f"{bound / min_bytes:.3g} of the problem's {min_bytes:,}")
    return TargetWork.UNKNOWN, (f"{flops_why}; {n:,} TMA transfers may move up to {bound or 0:,} bytes: their box sizes "
                                f"are not in the SASS, so whether they carry {threshold:g} of the problem's {min_bytes:,} "
                                "bytes is unknown")


def evidence_work(ev: TargetInstructionEvidence, problem_flops: int, problem_min_bytes: int, arch: Architecture,
                  threshold: float) -> TargetWorkShare:
    """The work share of a piece of target evidence: zero when no target instruction ran, unknown when the
    counts are unknown, else from its per-shape counts."""
    base = {"problem_flops": problem_flops, "problem_min_bytes": problem_min_bytes, "threshold": threshold}
    if ev.status in (TargetInstruction.ABSENT, TargetInstruction.NOT_EXECUTED):
        return TargetWorkShare(**base, target_flops=0, target_flops_bound=0, flops_share=0.0,
                               carries=TargetWork.DOES_NOT_CARRY,
                               reason=f"no target instruction {'in the SASS' if ev.status is TargetInstruction.ABSENT else 'executed'}")
    if ev.status is TargetInstruction.UNKNOWN:
        return TargetWorkShare(**base, carries=TargetWork.UNKNOWN, reason=f"no counts: {ev.reason}"[:300])
    if ev.target_ops:
        return share_verdict(ev.target_ops, problem_flops, problem_min_bytes, arch, threshold)
    ops = ops_from_raw_rows(ev.raw_rows, arch)
    if ops is None:
        return TargetWorkShare(**base, carries=TargetWork.UNKNOWN,
                               reason="the evidence has no per-shape counts (profiled before work shares were kept)")
    share = share_verdict(ops, problem_flops, problem_min_bytes, arch, threshold)
    return share.model_copy(update={"reason": f"{share.reason} (from the evidence's recorded rows)"[:300]})


@dataclass(frozen=True)
class SassRow:
    """One SASS line with ncu's two counters (an ExecutedRow): a row of the evidence's `raw_rows`, and the base of
    the counting run's parsed rows (ptxcore.gpu.harness.ncu.NcuRow)."""

    text: str
    inst_executed: int
    thread_inst_executed_true: int

    @property
    def opcode(self) -> str:
        return sass_opcode(self.text)


def ops_from_raw_rows(raw_rows: list[dict], arch: Architecture) -> list[TargetOpCount] | None:
    """Per-shape counts rebuilt from evidence that predates `target_ops` (verdicts recorded on a GPU host before
    work shares were kept): its `raw_rows` are every family row of the counted call unless the list reached
    RAW_ROW_CAP, when rows are missing and nothing is rebuilt (None); None too when there are no rows or a row is
    malformed (the counts cannot be trusted)."""
    if not raw_rows or len(raw_rows) >= RAW_ROW_CAP:
        return None
    rows = []
    for r in raw_rows:
        text, inst, thread = r.get("sass"), r.get("inst_executed"), r.get("thread_inst_executed_true")
        if not isinstance(text, str) or not isinstance(inst, int) or not isinstance(thread, int) or min(inst, thread) < 0:
            return None
        rows.append(SassRow(text, inst, thread))
    return target_ops(rows, arch)
