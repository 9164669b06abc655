"""Our records: compile, SASS, target-instruction evidence, judge envelope and the per-turn record.

Every record carries `schema_version` so the warehouse can migrate old rows.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field, field_validator, model_validator

from .arbitration import Arbitration
from .augmentation import FeedbackAugmentation
from .base import SCHEMA_VERSION, FrozenModel
from .enums import CompileStatus, EvaluationStatus, SandboxMode, StaticTarget, TargetInstruction
from .environment import EnvironmentInfo
from .migrate import empty_to_none, migrate_correctness
from .timing import TimingAudit
from .trace import Correctness, Performance
from .work import ProfiledKernel, ProfileOutcome, TargetOpCount, TargetWork, TargetWorkShare


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
    toolkit_version: str | None = None
    """nvcc release, e.g. 13.0.88 (None when the toolkit was not run)."""
    log: str = ""
    """Compiler output, trimmed for feedback."""
    reason: str = ""
    """One line: why rejected or what failed."""
    resources: PtxasResources = Field(default_factory=PtxasResources)
    """Parsed ptxas report."""
    cache_key: str | None = None
    """Content address of the build (source + flags + toolkit); None when nothing was built."""
    cubin_sha256: str | None = None
    """sha256 of the built device code (None when not compiled)."""
    artifact_sha256: str | None = None
    """sha256 of the whole built shared object: a GPU host reuses the build only when its file matches."""
    cache_hit: bool = False
    """The result was served from the compile cache (no nvcc ran)."""
    duration_s: float = 0.0
    """Wall time of the compile stage, seconds."""
    sandbox: SandboxMode | None = None
    """How nvcc was isolated; None when no nvcc ran for this result (rejected by the source scan)."""

    _empty = field_validator("toolkit_version", "cache_key", "cubin_sha256", "artifact_sha256",
                             mode="before")(empty_to_none)

    @property
    def verdict(self) -> EvaluationStatus | None:
        """The turn's final verdict when the kernel did not build; None when it compiled."""
        return self.status.verdict


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

    @property
    def static_instruction(self) -> TargetInstruction:
        """What this binary proves without running it (fold rule 2)."""
        return StaticTarget.instruction(self.target_static)


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
    source_sha256: str | None = None
    """Cache key part 1 (None when no source was judged)."""
    cubin_sha256: str | None = None
    """Cache key part 2 (None when nothing was built)."""
    target_ops: list[TargetOpCount] = Field(default_factory=list)
    """Per target SASS shape: instructions executed in the profiled call (all rows, not capped like raw_rows)."""
    profiled_kernels: list[ProfiledKernel] = Field(default_factory=list)
    """The kernels ncu profiled in the counted call (compared with the timed calls' CUPTI kernels)."""
    work: TargetWorkShare | None = None
    """The target path's share of the problem's work (None: not computed, e.g. nothing was profiled)."""
    profile: ProfileOutcome | None = None
    """How the counting run ended (None: none ran - static evidence, ncu off, not passed - or evidence recorded
    before this field)."""

    _empty = field_validator("source_sha256", "cubin_sha256", mode="before")(empty_to_none)

    @property
    def carries(self) -> TargetWork:
        """The strict verdict: the work share's, else unknown (never inferred from `status` alone)."""
        return self.work.carries if self.work is not None else TargetWork.UNKNOWN

    @classmethod
    def from_static(cls, sass: SassReport | None, reason: str, source_sha256: str | None = None,
                    cubin_sha256: str | None = None) -> TargetInstructionEvidence:
        """Evidence from the static SASS alone (nothing was profiled): absent or unknown."""
        static = sass.target_static if sass is not None else None
        return cls(status=StaticTarget.instruction(static), static=static, reason=reason,
                   source_sha256=source_sha256, cubin_sha256=cubin_sha256)


class SanitizerSummary(FrozenModel):
    """compute-sanitizer memcheck outcome."""

    ran: int = 0
    """Number of memcheck runs made."""
    errors: int = 0
    """Errors reported in the last run."""
    report: str = ""
    """Trimmed report for feedback."""


class CorrectnessStats(FrozenModel):
    """What the comparisons of one judgement found, over every output and every compared call."""

    trials: int = Field(ge=0)
    """Correctness trials compared (fresh seeded inputs each)."""
    matched_ratio: float
    """Fraction of elements within tolerance (NaN when an output held NaN)."""
    allclose: bool
    """The strict torch.allclose verdict over the same elements (stored so SQL can re-judge)."""
    mismatched: int = Field(ge=0)
    """Elements outside `abs > atol AND rel > rtol`."""
    numel: int = Field(ge=0)
    """Elements compared."""
    nan_count: int = Field(ge=0)
    """NaN elements in the outputs."""
    inf_count: int = Field(ge=0)
    """Infinite elements in the outputs."""
    timed_calls_verified: int = Field(ge=0)
    """Warm-up and timed calls whose outputs were compared as well."""
    timed_calls_passed: int = Field(ge=0)
    """Of those, the calls whose outputs were correct."""


class JudgeCorrectness(FrozenModel):
    """Numerical agreement with the reference (FlashInfer-Trace's Correctness, with typed statistics)."""

    max_relative_error: float = 0.0
    """Largest |out-ref| / |ref| over all elements and trials."""
    max_absolute_error: float = 0.0
    """Largest |out-ref| over all elements and trials."""
    stats: CorrectnessStats | None = None
    """Matched ratio, strict allclose, counts (None when no call was compared)."""
    arbitrations: list[Arbitration] = Field(default_factory=list)
    """Float64 arbitrations of calls whose outputs disagreed with the library (empty: none was needed)."""

    @model_validator(mode="before")
    @classmethod
    def _v1(cls, data: Any) -> Any:
        return migrate_correctness(data)

    def to_trace(self) -> Correctness:
        """FlashInfer-Trace's Correctness: the statistics go to `extra`, as v1 wrote them."""
        extra = self.stats.model_dump(mode="json") if self.stats is not None else None
        return Correctness(max_relative_error=self.max_relative_error, max_absolute_error=self.max_absolute_error,
                           extra=extra)


class RecordedVerdict(FrozenModel):
    """Where a reused verdict came from: it was reached earlier on a GPU, not in this judgement."""

    source: str
    """The recorded-verdict folder (FlashInfer-Trace) it was read from."""
    trace_sha256: str
    """sha256 of the trace line (its identity in that folder)."""
    gpu_name: str
    """GPU the verdict was reached on."""
    driver_version: str | None = None
    """Its driver."""
    judged_at: str
    """When (ISO-8601)."""

    @property
    def label(self) -> str:
        """Where and when it was measured, as every surface shows it: "NVIDIA H200, driver 580.159.04, 2026-12-01"."""
        return recorded_label(self.gpu_name, self.driver_version, self.judged_at)


def recorded_label(gpu_name: str | None, driver_version: str | None, judged_at: str | None) -> str:
    """"GPU, driver D, YYYY-MM-DD" of a recorded verdict (the warehouse view v_turn_outcomes builds the same text)."""
    return ", ".join(x for x in (gpu_name, driver_version and f"driver {driver_version}", (judged_at or "")[:10]) if x)


_CARRIES_CORRECTNESS = frozenset({EvaluationStatus.PASSED, EvaluationStatus.INCORRECT_NUMERICAL})
_RAN_NOTHING = frozenset({EvaluationStatus.COMPILE_ERROR, EvaluationStatus.NOT_EVALUATED,
                          EvaluationStatus.EXTRACTION_ERROR})


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
    workload_uuid: str | None = None
    """Workload judged (None when no workload was resolved)."""
    arch: str
    """Architecture key."""
    correctness: JudgeCorrectness | None = None
    """Numerical statistics (present for PASSED and INCORRECT_NUMERICAL; for RUNTIME_ERROR, TIMEOUT,
    REWARD_HACK and a REJECTED found at run time when calls were compared before the fault)."""
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
    recorded: RecordedVerdict | None = None
    """Set when this verdict was not reached now but reused from an earlier GPU judgement (route recorded:)."""
    timing_audit: TimingAudit | None = None
    """The timed trials' claims against the judge's own measurements (present when timed calls ran)."""

    _empty = field_validator("workload_uuid", mode="before")(empty_to_none)

    @model_validator(mode="after")
    def _status_fields(self) -> JudgeResult:
        """FlashInfer-Trace's invariants, extended to our statuses: PASSED carries correctness and
        performance, INCORRECT_NUMERICAL correctness only, no other status performance; a kernel that never
        ran carries no correctness."""
        s = self.status
        if s in _CARRIES_CORRECTNESS and self.correctness is None:
            raise ValueError(f"a {s.value} result must carry correctness")
        if (s is EvaluationStatus.PASSED) != (self.performance is not None):
            raise ValueError("performance belongs to PASSED results only, and every PASSED result has it")
        if s in _RAN_NOTHING and self.correctness is not None:
            raise ValueError(f"a {s.value} result ran no call, so it carries no correctness")
        return self


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
    gpu: str | None
    """GPU model the turn was judged on (None when no GPU judged it)."""
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
    augmentation: FeedbackAugmentation | None = None
    """What a feedback augmenter (repair retrieval) added to the feedback; None when none ran."""

    _empty = field_validator("gpu", mode="before")(empty_to_none)

    @property
    def key(self) -> tuple[str, str, int]:
        return (self.campaign_id, self.trajectory_id, self.turn)

    @property
    def target_work(self) -> TargetWork:
        """Did the target path carry the work (the judge's evidence; unknown without one)."""
        return self.judge.target_instruction.carries if self.judge is not None else TargetWork.UNKNOWN
