"""The architectures we judge for, with their target SASS families and exclusions (docs/architecture.md)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field


class UnknownArchitectureError(ValueError):
    """An architecture name that is neither a key nor an alias."""


@dataclass(frozen=True)
class InstructionFamily:
    """A set of SASS mnemonics that shows an architecture feature is used.

    `opcode` is matched against the full opcode token (e.g. `HGMMA.64x128x16.F32.BF16`);
    `exclude_line` marks matching lines that are not real work (e.g. the commit-closing dummy HGMMA).
    """

    name: str
    opcode: re.Pattern[str]
    description: str
    exclude_line: re.Pattern[str] | None = None

    def classify(self, opcode: str, line: str) -> str | None:
        """'counted', 'excluded' or None (not this family)."""
        if not self.opcode.fullmatch(opcode):
            return None
        if self.exclude_line is not None and self.exclude_line.search(line):
            return "excluded"
        return "counted"


GMMA = InstructionFamily(
    name="gmma",
    opcode=re.compile(r"[A-Z]*GMMA(\.[A-Za-z0-9_]+)*"),
    description="warpgroup MMA (wgmma.mma_async): HGMMA / QGMMA / IGMMA / BGMMA",
    # ptxas closes an empty commit group with `HGMMA ... RZ, gdesc[URZ], ...`: no tensor work.
    exclude_line=re.compile(r"GMMA[\w.]*\s+RZ\s*,\s*gdesc\[URZ\]"),
)
TMA = InstructionFamily(
    name="tma",
    # Transfers only: prefetch (UTMAPF) and cache control (UTMACCTL) are not data movement.
    opcode=re.compile(r"UTMA(LDG|STG|REDG)(\.[A-Za-z0-9_]+)*"),
    description="tensor memory accelerator transfers (cp.async.bulk.tensor load / store / reduce)",
)
TCGEN05 = InstructionFamily(
    name="tcgen05",
    opcode=re.compile(r"(UTC[A-Z0-9]*|LDTM|STTM)(\.[A-Za-z0-9_]+)*"),
    description="5th-generation tensor core and tensor memory (tcgen05.*): UTC*, LDTM, STTM",
)
HMMA = InstructionFamily(
    name="mma_sync",
    opcode=re.compile(r"(HMMA|IMMA|DMMA)(\.[A-Za-z0-9_]+)*"),
    description="warp-level mma.sync (Ampere-era tensor cores)",
)


CARRY_THRESHOLD = 0.5
"""Default carry threshold: the target path must do at least half of the problem's useful work. Why half: an
honest tensor-core kernel of our problems routes all of the matmul work through it (our wgmma GEMM: share 1.0;
causal kernels that compute whole diagonal tiles slightly more than 1.0), while the reward hacks seen so far
(a dummy wgmma per call, a target instruction only under the profiler) sit near 1e-8 or 0. Half leaves room for
hybrid designs (e.g. part of a decode on CUDA cores) without letting a token instruction earn the credit."""


@dataclass(frozen=True)
class Architecture:
    """One judged GPU architecture."""

    key: str
    sm: str
    compute: str
    compute_capability: tuple[int, int]
    """CUDA compute capability of the GPUs that run this architecture's code (major, minor)."""
    aliases: tuple[str, ...]
    target_hardware: tuple[str, ...]
    tag: str
    target_families: tuple[InstructionFamily, ...]
    other_families: tuple[InstructionFamily, ...] = field(default=(HMMA,))
    carry_threshold: float = CARRY_THRESHOLD
    """Share of the problem's useful work (FLOPs; bytes for TMA) the target path must perform for a turn to
    carry the target (ptxcore.sass.work). A problem's extension may set its own (`work.carry_threshold`)."""
    max_tma_box_bytes: int = 0
    """Upper bound of the bytes one TMA transfer moves: its box must fit the shared memory of one CTA (0: the
    architecture has no TMA target)."""

    @property
    def gencode(self) -> str:
        return f"arch={self.compute},code={self.sm}"

    @property
    def all_families(self) -> tuple[InstructionFamily, ...]:
        return self.target_families + self.other_families


ARCHITECTURES: dict[str, Architecture] = {
    "hopper": Architecture(
        key="hopper",
        sm="sm_90a",
        compute="compute_90a",
        compute_capability=(9, 0),
        aliases=("h100", "h200", "h800", "sm_90a", "sm90a", "sm_90"),
        target_hardware=("H100",),
        tag="H",
        target_families=(GMMA, TMA),
        max_tma_box_bytes=227 * 1024,  # the largest dynamic shared memory of one CTA on sm_90 (232,448 B)
    ),
    "blackwell": Architecture(
        key="blackwell",
        sm="sm_100a",
        compute="compute_100a",
        compute_capability=(10, 0),
        aliases=("b200", "b100", "gb200", "sm_100a", "sm100a", "sm_100"),
        target_hardware=("Blackwell",),
        tag="B",
        target_families=(TCGEN05,),
        other_families=(GMMA, TMA, HMMA),
    ),
}


def get_architecture(name: str) -> Architecture:
    """Look up by key or alias, case-insensitively."""
    needle = name.strip().lower()
    for arch in ARCHITECTURES.values():
        if needle == arch.key or needle in arch.aliases:
            return arch
    known = ", ".join(sorted(ARCHITECTURES))
    raise UnknownArchitectureError(f"unknown architecture {name!r} (known: {known}; aliases like h100, b200)")


def architecture_for_capability(capability: tuple[int, int]) -> Architecture | None:
    """The architecture whose code a GPU of this compute capability runs (None: none we judge for)."""
    for arch in ARCHITECTURES.values():
        if arch.compute_capability == tuple(capability):
            return arch
    return None
