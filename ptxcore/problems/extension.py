"""Our per-problem extension (`<name>.ptxbench.yaml` beside the definition): what FlashInfer-Trace lacks."""

from __future__ import annotations

from enum import Enum
from typing import Literal

from pydantic import Field

from ptxcore.schema import FrozenModel


class BaselineLibrary(str, Enum):
    """The frontier library a candidate is timed against."""

    CUBLAS = "cublas"
    CUDNN = "cudnn"
    FLASHINFER = "flashinfer"


class Baseline(FrozenModel):
    """How the judge produces reference outputs and the reference latency."""

    library: BaselineLibrary
    """Library the speedup is measured against."""
    implementation: str
    """Key of the baseline implementation in ptxcore.gpu (e.g. gemm_nt_torch_matmul)."""
    description: str = ""
    """The exact call, for humans."""


class Tolerance(FrozenModel):
    """Correctness rule. `ptxbench`: an element mismatches when abs > atol AND rel > rtol."""

    rule: Literal["ptxbench", "allclose"] = "ptxbench"
    """Which comparison decides PASSED."""
    atol: float = 1e-2
    """Absolute tolerance."""
    rtol: float = 1e-2
    """Relative tolerance."""
    matched_ratio: float = Field(default=1.0, ge=0.0, le=1.0)
    """Fraction of elements that must match."""


class InputDistribution(FrozenModel):
    """How one random input is drawn (or derived from the others)."""

    distribution: Literal["normal", "uniform", "derived", "structure"] = "normal"
    """normal/uniform: i.i.d. draws; derived: computed from other inputs; structure: index tensors."""
    mean: float = 0.0
    """Normal mean."""
    std: float = 1.0
    """Normal standard deviation."""
    low: float = 0.0
    """Uniform lower bound."""
    high: float = 1.0
    """Uniform upper bound."""
    source: str = ""
    """For derived inputs: what computes them (e.g. attention_forward.O)."""


class Structure(FrozenModel):
    """Index structure of ragged / paged workloads (fixed data; indices drawn from the seed)."""

    kind: Literal["ragged", "paged_prefill", "paged_decode"]
    """Layout family."""
    q_lens: list[int] = Field(default_factory=list)
    """Query tokens per sequence (empty for decode: one token each)."""
    kv_lens: list[int]
    """KV tokens (= pages at page size 1) per sequence."""
    num_pages: int = 0
    """Pages in the paged KV cache."""
    page_size: int = 1
    """Tokens per page."""
    causal: bool = False
    """Causal mask aligned bottom-right (query i sees kv j <= i + kv_len - q_len)."""


class ProblemExtension(FrozenModel):
    """Everything the benchmark needs beyond the FlashInfer-Trace definition."""

    schema_version: int = 1
    """Extension format version."""
    definition: str
    """Definition name this extends."""
    primary: bool = False
    """One of the paper's five primary problems."""
    baseline: Baseline
    """Reference library."""
    tolerance: Tolerance = Field(default_factory=Tolerance)
    """Correctness rule."""
    seed: int
    """Base seed; trial t uses seed + t."""
    inputs: dict[str, InputDistribution]
    """Distribution per non-scalar input."""
    structure: Structure | None = None
    """Ragged/paged index layout, for GQA problems."""
    targets: dict[str, list[str]]
    """Per architecture key: instruction families any of which counts as target use."""
    lse_base: Literal["e", "2"] | None = None
    """Logarithm base of an LSE output, when there is one."""
    notes: str = ""
    """Provenance and caveats."""
