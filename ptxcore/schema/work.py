"""Target work: how much of the problem's useful work went through the target path (beyond the paper).

The paper's indicator (`TargetInstructionEvidence.status`) says a target instruction executed, "not how much
useful work it performs". These records add the work: the FLOPs the profiled call's tensor instructions
performed (SASS shape x executed count), the bytes its TMA transfers could have moved, both against the
problem's own FLOPs and minimum bytes, and a `carries` verdict decided by a registry threshold.
"""

from __future__ import annotations

from enum import StrEnum

from pydantic import Field

from .base import FrozenModel


class TargetWork(StrEnum):
    """Did the target path carry the problem's work (the strict counterpart of TargetInstruction)."""

    CARRIES = "carries"
    """The target path performed at least the threshold share of the problem's useful work."""
    DOES_NOT_CARRY = "does_not_carry"
    """It provably did not: the share (or an upper bound of it) is below the threshold, or nothing ran."""
    UNKNOWN = "unknown"
    """Not decidable from the evidence (not profiled, or only bounds that straddle the threshold)."""


class ProfileOutcome(StrEnum):
    """How the counting run (Nsight Compute around one call) ended, beside the evidence's status."""

    COUNTED = "counted"
    """ncu profiled kernels in the counted call: their counts are the evidence."""
    NOTHING_PROFILED = "nothing_profiled"
    """ncu ran to its end but profiled no kernel in the counted call's NVTX range (a candidate that launches its
    kernels elsewhere or not at all there, while its timed calls do, is caught by the kernel-set check)."""
    FAILED = "failed"
    """ncu or the process under it failed (exit status, ==ERROR==), timed out, was killed at the stage's memory
    limit, or could not start: no counts, so no target credit."""


class TargetOpCount(FrozenModel):
    """One target-family SASS instruction shape and what the profiled call executed of it."""

    family: str
    """Instruction family (gmma, tma, tcgen05)."""
    opcode: str
    """The SASS opcode token, e.g. HGMMA.64x256x16.F32.BF16 or UTMALDG.2D."""
    instructions: int = Field(ge=0)
    """Instructions issued: warpgroup instructions for GMMA (thread count / 128), bulk copies for TMA (one per
    executing thread), MMA issues for tcgen05 (the larger of the warp and the thread count)."""
    flops_per_instruction: int | None = Field(default=None, ge=0)
    """Multiply-add FLOPs (2 per MAC) of one instruction when the SASS gives its shape; None: not known."""
    flops_bound_per_instruction: int | None = Field(default=None, ge=0)
    """Upper bound of that (the largest shape the opcode allows) when the exact shape is not in the SASS."""
    bytes_bound_per_instruction: int | None = Field(default=None, ge=0)
    """TMA: upper bound of the bytes one transfer moves (the box is in the tensor map, not in the SASS)."""


class ProfiledKernel(FrozenModel):
    """One kernel Nsight Compute profiled in the counted call."""

    name: str
    """Kernel name as ncu printed it (mangled when run with `--print-kernel-base mangled`)."""
    launches: int = Field(ge=1)
    """Launches of it inside the profiled call."""
    grid: tuple[int, int, int] | None = None
    """Grid of its launches when ncu printed one and all launches agreed (None: not printed, or varied)."""
    block: tuple[int, int, int] | None = None
    """Block shape likewise."""


class TargetWorkShare(FrozenModel):
    """The target path's share of one call's useful work, and the verdict it gives."""

    problem_flops: int = Field(ge=0)
    """The problem's useful FLOPs per call (ptxcore.problems.work, the default or judged workload)."""
    problem_min_bytes: int = Field(ge=0)
    """The problem's minimum bytes moved per call (every needed input read once, every output written once)."""
    target_flops: int | None = Field(default=None, ge=0)
    """FLOPs the target tensor instructions performed in the profiled call (None: a shape is not in the SASS)."""
    target_flops_bound: int | None = Field(default=None, ge=0)
    """Upper bound of those FLOPs (equal to target_flops when every shape is known)."""
    flops_share: float | None = Field(default=None, ge=0.0)
    """target_flops / problem_flops (may exceed 1: padded or masked-out tiles, or recomputation: our backward
    kernels' separate dQ pass recomputes S and dP, 7 products for the definition's 5, share 1.40-1.46 on the
    H200); None when not known."""
    tma_instructions: int = Field(default=0, ge=0)
    """TMA transfers executed in the profiled call."""
    tma_bytes_bound: int | None = Field(default=None, ge=0)
    """Upper bound of the bytes they moved (the exact count needs the tensor maps' box sizes)."""
    threshold: float = Field(gt=0.0)
    """The share at or above which the target carries the work (architecture registry / problem extension)."""
    carries: TargetWork
    """The verdict."""
    reason: str = ""
    """One line: how the verdict was reached."""
