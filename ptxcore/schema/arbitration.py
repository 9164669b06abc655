"""Arbitrated correctness: where the kernel and the library reference disagree, float64 decides.

The library reference (cuBLAS, cuDNN, FlashInfer) is itself rounded. When a kernel's outputs mismatch it on some
elements, the judge recomputes those outputs in float64 from the definition's own reference, on the disputed
slices only, and rules each disputed element by the paper's tolerance against float64.
"""

from __future__ import annotations

from enum import StrEnum

from pydantic import Field

from .base import FrozenModel


class ArbitrationOutcome(StrEnum):
    """What the float64 recomputation said about the disputed elements."""

    KERNEL_EXACT = "kernel_exact"
    """Every element of the recomputed slices (the disputed ones included) of the kernel is within tolerance of
    float64: the library was the inexact one, and the disputed elements count as matched."""
    KERNEL_INEXACT = "kernel_inexact"
    """Some element of the kernel in the recomputed slices is outside tolerance of float64 (or NaN): the mismatch
    stands."""
    NOT_ARBITRATED = "not_arbitrated"
    """Not recomputed (too many disputed elements or slices, no slicing rule, a reference failure): the
    comparison against the library stands."""


class DisputedElement(FrozenModel):
    """One disputed element, with the three values."""

    output: str
    """Output tensor name."""
    index: list[int]
    """Element index in the output."""
    kernel: float
    """The kernel's value."""
    library: float
    """The library reference's value."""
    float64: float
    """The definition's reference recomputed in float64."""


class OutputArbitration(FrozenModel):
    """The disputed elements of one output."""

    output: str
    """Output tensor name."""
    disputed: int = Field(ge=0)
    """Elements where kernel and library disagreed by the rule."""
    kernel_max_abs_error: float = Field(ge=0.0)
    """Largest |kernel - float64| over the disputed elements."""
    library_max_abs_error: float = Field(ge=0.0)
    """Largest |library - float64| over the disputed elements."""
    kernel_mismatches: int = Field(ge=0)
    """Disputed elements where the kernel is outside tolerance of float64 (NaN counts)."""
    library_mismatches: int = Field(ge=0)
    """Disputed elements where the library is outside tolerance of float64."""
    slice_kernel_max_abs_error: float | None = Field(default=None, ge=0.0)
    """Largest |kernel - float64| over every element of the recomputed slices (None: not recomputed)."""
    slice_library_max_abs_error: float | None = Field(default=None, ge=0.0)
    """Largest |library - float64| over the same slices."""
    slice_kernel_mismatches: int | None = Field(default=None, ge=0)
    """Elements of the recomputed slices where the kernel is outside tolerance of float64 (the ruling's count)."""
    slice_elements: int | None = Field(default=None, ge=0)
    """Elements in the recomputed slices."""


class Arbitration(FrozenModel):
    """The record of one arbitration (attached to JudgeCorrectness)."""

    outcome: ArbitrationOutcome
    """The ruling."""
    atol: float = Field(ge=0.0)
    """Absolute tolerance of the ruling (the problem's)."""
    rtol: float = Field(ge=0.0)
    """Relative tolerance of the ruling."""
    inexact: list[str] = Field(default_factory=list)
    """Who was inexact on the disputed elements: "library", "kernel", both, or neither (empty)."""
    slices: list[str] = Field(default_factory=list)
    """The slices recomputed in float64, e.g. "B=1,H=8" or "M rows 0..3" (capped)."""
    outputs: list[OutputArbitration] = Field(default_factory=list)
    """Per output with disputed elements."""
    elements: list[DisputedElement] = Field(default_factory=list)
    """The first disputed elements with all three values (capped)."""
    trial: int | None = Field(default=None, ge=0)
    """The correctness trial whose outputs were arbitrated (None: not said)."""
    reason: str = ""
    """One line: why not arbitrated, or a summary."""
    reference_corrected: bool = False
    """KERNEL_EXACT in a judgement: the trial's warm-up and timed calls were verified against the library's
    reference with the recomputed slices replaced by their float64 values (rounded to the output's dtype)."""
