"""Our per-problem extension (`<name>.ptxbench.yaml` beside the definition): what FlashInfer-Trace lacks."""

from __future__ import annotations

from enum import Enum, StrEnum
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


class FlopsFormula(StrEnum):
    """How a problem's useful FLOPs follow from its workload (ptxcore.problems.work has the arithmetic)."""

    GEMM = "gemm"
    """2*M*N*K: C[M,N] = A[M,K] @ B[N,K]^T, one multiply and one add per term."""
    ATTENTION_FORWARD = "attention_forward"
    """4*D*heads*pairs: S = Q K^T and O = P V, 2*D FLOPs each per unmasked (query, key) pair and query head."""
    ATTENTION_BACKWARD = "attention_backward"
    """10*D*heads*pairs: five matmuls per unmasked pair (S = Q K^T recomputed from L, dP = dO V^T, dV = P^T dO,
    dQ = dS K, dK = dS^T Q), the FlashAttention convention of 2.5x the forward."""


class BytesRule(StrEnum):
    """How a problem's minimum bytes moved follow from its workload."""

    IO = "io"
    """Every input tensor read once and every output written once (scalars are arguments, 0 bytes)."""
    PAGED_IO = "paged_io"
    """As io, but of a paged KV cache (inputs whose first axis is num_pages) only the pages the indices name."""


class WorkSpec(FrozenModel):
    """The problem's useful work: which formula gives its FLOPs and which rule its minimum bytes."""

    flops: FlopsFormula
    """FLOPs formula; attention formulas count only unmasked (query, key) pairs (causal: exact count)."""
    min_bytes: BytesRule = BytesRule.IO
    """Minimum-bytes rule."""
    carry_threshold: float | None = Field(default=None, gt=0.0, le=1.0)
    """This problem's carry threshold (None: the architecture registry's, ptxcore.arch CARRY_THRESHOLD)."""


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
    work: WorkSpec
    """Useful work (FLOPs formula, minimum-bytes rule): what the target path's share is measured against."""
    lse_base: Literal["e", "2"] | None = None
    """Logarithm base of an LSE output, when there is one."""
    notes: str = ""
    """Provenance and caveats."""
