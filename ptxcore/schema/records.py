"""Our records: compile, SASS, target-instruction evidence, judge envelope and the per-turn record.

Every record carries `schema_version` so the warehouse can migrate old rows.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from .base import SCHEMA_VERSION, FrozenModel
from .enums import CompileStatus, EvaluationStatus, SandboxMode, StaticTarget, TargetInstruction
from .trace import Correctness, Performance


class KernelResources(FrozenModel):
    """ptxas's resource report for one kernel function."""

    function: str
    """Mangled function name."""
    arch: str
    """SM target, e.g. sm_90a."""
    registers: int = 0
    """Registers per thread."""
    shared_bytes: int = 0
    """Static shared memory per block, bytes."""
    constant_bytes: int = 0
    """Constant bank 0 bytes (kernel parameters)."""
    stack_frame_bytes: int = 0
    """Per-thread stack frame, bytes."""
    spill_store_bytes: int = 0
    """Bytes spilled to local memory (stores)."""
    spill_load_bytes: int = 0
    """Bytes reloaded from local memory."""
    barriers: int = 0
    """Named barriers used."""


class PtxasResources(FrozenModel):
    """Everything ptxas -v said about the build."""

    kernels: list[KernelResources] = Field(default_factory=list)
    """One entry per kernel function."""
    performance_warnings: list[str] = Field(default_factory=list)
    """ptxas performance advisories, e.g. C7508 (setmaxnreg ignored), C7510 (wgmma serialized)."""

    @property
    def max_registers(self) -> int:
        return max((k.registers for k in self.kernels), default=0)

    @property
    def total_spill_bytes(self) -> int:
        return sum(k.spill_store_bytes + k.spill_load_bytes for k in self.kernels)


class CompileResult(FrozenModel):
    """Outcome of compiling one candidate on a CPU worker."""

    schema_version: int = SCHEMA_VERSION
    """Record schema version."""
    status: CompileStatus
    """COMPILED, COMPILE_ERROR or REJECTED."""
    source_sha256: str
    """sha256 of the candidate source text."""
    arch: str
    """Architecture key, e.g. hopper."""
    flags: list[str] = Field(default_factory=list)
    """The nvcc command line (without input and output paths)."""
    toolkit_version: str = ""
    """nvcc release, e.g. 13.0.88."""
    log: str = ""
    """Compiler output, trimmed for feedback."""
    reason: str = ""
    """One line: why rejected or what failed."""
    resources: PtxasResources = Field(default_factory=PtxasResources)
    """Parsed ptxas report."""
    cache_key: str = ""
    """Content address of the build (source + flags + toolkit)."""
    cubin_sha256: str = ""
    """sha256 of the built device code (empty when not compiled)."""
    cache_hit: bool = False
    """The result was served from the compile cache (no nvcc ran)."""
    duration_s: float = 0.0
    """Wall time of the compile stage, seconds."""
    sandbox: SandboxMode | None = None
    """How nvcc was isolated; None when no nvcc ran for this result (rejected by the source scan)."""


class SassReport(FrozenModel):
    """Static disassembly facts about a built object."""

    schema_version: int = SCHEMA_VERSION
    """Record schema version."""
    arch: str
    """Architecture key."""
    counts: dict[str, int] = Field(default_factory=dict)
    """Executable instructions per base mnemonic, over all functions."""
    functions: dict[str, dict[str, int]] = Field(default_factory=dict)
    """Per kernel function: counts per base mnemonic."""
    family_counts: dict[str, int] = Field(default_factory=dict)
    """Counted target-family instructions (after exclusions), per family."""
    excluded: list[str] = Field(default_factory=list)
    """Lines matching a family but excluded (commit-closing dummy HGMMA, TMA prefetch, ...)."""
    target_static: StaticTarget
    """present when any required family has a counted instruction."""
    required_families: list[str] = Field(default_factory=list)
    """Families that satisfy the target for this architecture."""


class TargetInstructionEvidence(FrozenModel):
    """Did the target instructions execute: static verdict, then Nsight Compute counts."""

    schema_version: int = SCHEMA_VERSION
    """Record schema version."""
    status: TargetInstruction
    """executed | not_executed | absent | unknown."""
    static: StaticTarget | None = None
    """Static verdict it started from (None when no binary was inspected)."""
    family_thread_inst_executed: dict[str, int] = Field(default_factory=dict)
    """Per family: sum of thread_inst_executed_true over its SASS rows."""
    raw_rows: list[dict[str, Any]] = Field(default_factory=list)
    """Raw per-instruction rows from ncu (function, address, opcode, counters)."""
    tool: str = ""
    """Tool and version that produced the counts."""
    reason: str = ""
    """Why unknown, or notes."""
    source_sha256: str = ""
    """Cache key part 1."""
    cubin_sha256: str = ""
    """Cache key part 2."""


class SanitizerSummary(FrozenModel):
    """compute-sanitizer memcheck outcome."""

    ran: int = 0
    """Number of memcheck runs made."""
    errors: int = 0
    """Errors reported in the last run."""
    report: str = ""
    """Trimmed report for feedback."""


class EnvironmentInfo(FrozenModel):
    """Where a judgement was made."""

    gpu_name: str = ""
    """e.g. NVIDIA H200."""
    driver_version: str = ""
    """NVIDIA driver."""
    cuda_toolkit: str = ""
    """nvcc release."""
    torch_version: str = ""
    """torch.__version__ on the judge."""
    sm_clock_mhz_before: int = 0
    """SM clock before timing."""
    sm_clock_mhz_after: int = 0
    """SM clock after timing."""
    temperature_c_before: int = 0
    """GPU temperature before timing."""
    temperature_c_after: int = 0
    """GPU temperature after timing."""
    throttle_reasons: list[str] = Field(default_factory=list)
    """Active clock-throttle reasons seen during timing (empty when clean)."""
    extra: dict[str, str] = Field(default_factory=dict)
    """Further versions (cupy, tvm_ffi, ncu)."""


class JudgeResult(FrozenModel):
    """The result envelope of `ptxbench eval` and of the judge task."""

    schema_version: int = SCHEMA_VERSION
    """Record schema version."""
    status: EvaluationStatus
    """Verdict."""
    reason: str = ""
    """One line: why (for anything but PASSED)."""
    definition: str
    """Problem name."""
    workload_uuid: str = ""
    """Workload judged."""
    arch: str
    """Architecture key."""
    correctness: Correctness | None = None
    """Numerical statistics."""
    performance: Performance | None = None
    """Timing (correct candidates only)."""
    sanitizer: SanitizerSummary | None = None
    """Memory-safety gate."""
    target_instruction: TargetInstructionEvidence
    """Target instruction verdict and evidence."""
    compile: CompileResult | None = None
    """Compile stage result."""
    sass: SassReport | None = None
    """Static SASS report."""
    environment: EnvironmentInfo = Field(default_factory=EnvironmentInfo)
    """Where it ran."""
    stage_seconds: dict[str, float] = Field(default_factory=dict)
    """Wall time per stage (build, sanitizer, correctness, timing, ncu)."""
    log: str = ""
    """Trimmed log for feedback."""


class LLMUsage(FrozenModel):
    """Token usage and cost of one model call."""

    prompt_tokens: int = 0
    """Input tokens."""
    completion_tokens: int = 0
    """Output tokens (including reasoning where the provider counts them so)."""
    reasoning_tokens: int = 0
    """Reasoning tokens, when reported."""
    cached_tokens: int = 0
    """Prompt tokens served from the provider's cache."""
    latency_s: float = 0.0
    """Wall time of the call, seconds."""
    cost_usd: float | None = None
    """Cost when known."""


class TurnRecord(FrozenModel):
    """One agent turn, keyed by (campaign_id, trajectory_id, turn)."""

    schema_version: int = SCHEMA_VERSION
    """Record schema version."""
    campaign_id: str
    """Campaign identity."""
    trajectory_id: str
    """Trajectory identity (unique within the campaign)."""
    turn: int = Field(ge=0)
    """0-based turn index."""
    model: str
    """litellm model string."""
    arch: str
    """Architecture key."""
    gpu: str
    """GPU model the turn was judged on (empty when not evaluated)."""
    prompt_variant: str
    """Prompt variant name."""
    problem: str
    """Definition name."""
    prompt_sha256: str = ""
    """Hash of the assembled system prompt."""
    kernel_sha256: str | None = None
    """sha256 of the extracted kernel (None on extraction error)."""
    kernel_text: str | None = None
    """Kernel source (stored once by hash in the warehouse)."""
    response_text: str = ""
    """The model's raw answer."""
    reasoning_text: str = ""
    """The model's reasoning, when returned."""
    usage: LLMUsage = Field(default_factory=LLMUsage)
    """Token usage."""
    status: EvaluationStatus
    """Turn verdict."""
    target_instruction: TargetInstruction = TargetInstruction.UNKNOWN
    """Target-instruction verdict."""
    speedup: float | None = None
    """reference / candidate latency for correct turns."""
    feedback: str = ""
    """The feedback message sent back to the model."""
    compile: CompileResult | None = None
    """Compile stage."""
    judge: JudgeResult | None = None
    """GPU judge envelope."""
    environment: EnvironmentInfo = Field(default_factory=EnvironmentInfo)
    """Where it was judged."""
    created_at: str = ""
    """ISO-8601 time."""

    @property
    def key(self) -> tuple[str, str, int]:
        return (self.campaign_id, self.trajectory_id, self.turn)
