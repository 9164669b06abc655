"""Wire and state models of the profiling service (pydantic only: no FastAPI, no torch)."""

from __future__ import annotations

import re
from enum import StrEnum
from typing import Annotated, Any

from pydantic import AfterValidator, Field, model_validator

from ptxcore.schema import FrozenModel, JudgedLanguage, JudgeResult, Language, Solution

NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.\-]{0,127}$"
"""Definition and architecture names: no slashes, no `..` prefix; never used as paths anyway."""
UUID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9\-]{0,63}$"
"""Workload uuids."""
TASK_ID_PATTERN = r"^[0-9a-f]{32}$"
"""Task ids (uuid4 hex)."""
MAX_SOURCE_CHARS = 8 << 20
"""Backstop on a candidate's length; the server's own (smaller) byte limit answers 413 first."""
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def _encodable(value: str) -> str:
    """Text that can be stored, hashed and returned: no lone surrogates (JSON allows `\\ud800`), no NUL."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError("contains a lone surrogate (not text)") from None
    if "\x00" in value:
        raise ValueError("contains a NUL character")
    return value


def _label(value: str) -> str:
    """A one-line label for logs and /health: encodable, no control characters."""
    if _CONTROL.search(_encodable(value)):
        raise ValueError("contains control characters (one printable line expected)")
    return value


SourceText = Annotated[str, Field(max_length=MAX_SOURCE_CHARS), AfterValidator(_encodable)]
"""A candidate's text."""
LabelText = Annotated[str, Field(max_length=200), AfterValidator(_label)]
"""A short free-text label (client tag, drain reason)."""


def check_strings(value: Any, where: str) -> None:
    """Every string inside a dumped model is encodable text (ValueError naming the first bad one's path)."""
    if isinstance(value, str):
        try:
            _encodable(value)
        except ValueError as exc:
            raise ValueError(f"{where}: {exc}") from None
    elif isinstance(value, dict):
        for k, v in value.items():
            check_strings(k, where)
            check_strings(v, f"{where}.{k}")
    elif isinstance(value, list):
        for i, v in enumerate(value):
            check_strings(v, f"{where}.{i}")


class TaskKind(StrEnum):
    """What a task asks of the judge (FIBServe's endpoint names)."""

    EVALUATE = "evaluate"
    """The whole pipeline: safety gate, correctness, timing, target-instruction check."""
    SANITIZE = "sanitize"
    """The memory-safety gate alone."""
    PROFILE = "profile"
    """The target-instruction check alone (static SASS, then Nsight Compute counts)."""


class TaskState(StrEnum):
    """Lifecycle of a task. `completed` means a verdict exists (it may be any EvaluationStatus)."""

    PENDING = "pending"
    RUNNING = "running"
    COMPLETED = "completed"
    FAILED = "failed"
    """Infrastructure failed on every attempt; the result (if any) is INFRA_ERROR; resubmit later."""
    LOST = "lost"
    """The service stopped while the task ran; its result is unknown and it will not be re-run: resubmit."""

    @property
    def terminal(self) -> bool:
        return self in (TaskState.COMPLETED, TaskState.FAILED, TaskState.LOST)


class AttemptDisposition(StrEnum):
    """What became of one attempt at a task."""

    SCORED = "scored"
    """Its verdict is the task's result."""
    EXCLUDED = "excluded"
    """Discarded (infrastructure at fault); never scored; the task was retried or failed."""


class GpuCondition(StrEnum):
    """Health of one GPU and its worker, as judged between tasks."""

    HEALTHY = "healthy"
    HOT = "hot"
    """Temperature at or above the limit."""
    THROTTLED = "throttled"
    """A draining clock-event reason is active (thermal or hardware slowdown)."""
    LOW_MEMORY = "low_memory"
    """Free device memory below the floor (another process holds it)."""
    LEAKING = "leaking"
    """The worker holds allocations beyond its workload state; it is restarted."""
    UNRESPONSIVE = "unresponsive"
    """The worker or the health probe did not answer."""
    UNKNOWN = "unknown"
    """Not checked yet."""


class LaneState(StrEnum):
    """State of one GPU's worker lane."""

    STARTING = "starting"
    IDLE = "idle"
    BUSY = "busy"
    DRAINED = "drained"
    """Takes no tasks until healthy again (or resumed by an operator)."""
    RESTARTING = "restarting"
    FAILED = "failed"
    """The worker cannot be started; retried with back-off."""
    STOPPED = "stopped"


class ServiceStatus(StrEnum):
    """Overall /health verdict."""

    OK = "ok"
    DEGRADED = "degraded"
    """Some GPUs are drained or failed; others serve."""
    UNAVAILABLE = "unavailable"
    """No GPU takes tasks."""


class SubmitRequest(FrozenModel):
    """POST /evaluate, /sanitize, /profile. The candidate comes as text: either `source` or a
    FlashInfer-Trace `solution` with exactly one source file (`name.cu` for CUDA, `name.py` for Triton, its
    spec.language equal to `language`). No field is ever used as a path."""

    definition: str = Field(pattern=NAME_PATTERN)
    """Problem name (must be in the service's catalog)."""
    source: SourceText | None = None
    """Candidate text: kernel.cu (CUDA) or kernel.py (Triton)."""
    language: JudgedLanguage = Language.CUDA
    """What the candidate is written in: cuda or triton."""
    solution: Solution | None = None
    """Alternatively a FlashInfer-Trace Solution (its single source file's text is used)."""
    arch: str = Field(default="hopper", pattern=NAME_PATTERN)
    """Architecture key the candidate targets."""
    workload_uuid: str | None = Field(default=None, pattern=UUID_PATTERN)
    """Workload to judge on (default: the problem's primary workload)."""
    timeout_s: float | None = Field(default=None, ge=1.0, allow_inf_nan=False)
    """Wall-clock limit for this task in the worker, seconds (bounded by the server's maximum)."""
    client_tag: LabelText = ""
    """Free text for logs, e.g. campaign/trajectory/turn (one printable line)."""

    @model_validator(mode="after")
    def _one_source(self) -> SubmitRequest:
        if (self.source is None) == (self.solution is None):
            raise ValueError("give exactly one of `source` or `solution`")
        if self.solution is not None:
            check_strings(self.solution.model_dump(mode="python"), "solution")
            if len(self.solution.sources[0].content) > MAX_SOURCE_CHARS:
                raise ValueError(f"solution source longer than {MAX_SOURCE_CHARS} characters")
            files = self.solution.sources
            if len(files) != 1:
                raise ValueError("a solution must hold exactly one source file")
            path, suffix = files[0].path, "." + self.language.source_file.rsplit(".", 1)[1]
            if "/" in path or "\\" in path or path.startswith(".") or not path.endswith(suffix):
                raise ValueError(f"solution source path must be a plain `name{suffix}`, got {path!r}")
            if self.solution.definition != self.definition:
                raise ValueError("solution.definition differs from definition")
            if self.solution.spec.language is not self.language:
                raise ValueError(f"solution.spec.language {self.solution.spec.language.value!r} differs from "
                                 f"language {self.language.value!r}")
        return self

    def source_text(self) -> str:
        return self.source if self.source is not None else self.solution.sources[0].content


class BatchItem(SubmitRequest):
    """One item of POST /batch."""

    kind: TaskKind = TaskKind.EVALUATE
    """Which judgement."""


class BatchSubmitRequest(FrozenModel):
    """POST /batch: many submissions at once."""

    items: list[BatchItem] = Field(min_length=1)
    """The submissions, in order."""


class SubmitResponse(FrozenModel):
    """Answer to a submission."""

    task_id: str
    """Poll GET /tasks/{task_id}."""
    state: TaskState
    """pending on acceptance."""
    source_sha256: str
    """Content identity of the candidate."""


class BatchSubmitResponse(FrozenModel):
    """Answer to POST /batch."""

    tasks: list[SubmitResponse]
    """One per item, same order."""


class BatchPollRequest(FrozenModel):
    """POST /tasks/batch (FIBServe's batch get)."""

    task_ids: list[str] = Field(min_length=1)
    """Tasks to read."""
    wait_s: float = Field(default=0.0, ge=0.0, allow_inf_nan=False)
    """Long-poll: wait until all are terminal or this many seconds passed."""


class AttemptRecord(FrozenModel):
    """One attempt at a task on one GPU."""

    gpu: int
    """Physical GPU index."""
    started_at: float
    """Unix time, seconds."""
    finished_at: float
    """Unix time, seconds."""
    disposition: AttemptDisposition
    """scored or excluded."""
    reason: str = ""
    """Why excluded (or a note)."""


class TaskView(FrozenModel):
    """GET /tasks/{id}: the task and, when completed, its JudgeResult."""

    task_id: str
    """Identity."""
    kind: TaskKind
    """Which judgement."""
    state: TaskState
    """Lifecycle state."""
    definition: str
    """Problem name."""
    workload_uuid: str = ""
    """Workload (empty: the primary one)."""
    arch: str
    """Architecture key."""
    source_sha256: str
    """Candidate identity."""
    language: Language = Language.CUDA
    """The candidate's language (cuda, triton)."""
    client_tag: str = ""
    """Client's label."""
    timeout_s: float = 0.0
    """Worker wall-clock limit for one attempt, seconds."""
    gpu: int | None = None
    """GPU of the scored (or last) attempt."""
    attempts: list[AttemptRecord] = Field(default_factory=list)
    """Every attempt, excluded ones included."""
    created_at: float
    """Unix time of submission."""
    started_at: float | None = None
    """Unix time the last attempt started."""
    finished_at: float | None = None
    """Unix time the task became terminal."""
    queue_s: float | None = None
    """Seconds from submission to the start of the scored attempt."""
    service_s: float | None = None
    """Seconds the scored attempt ran in the worker."""
    result: JudgeResult | None = None
    """The verdict (completed), or the last INFRA_ERROR (failed)."""
    error: str = ""
    """For failed and lost tasks: what happened and what to do."""


class WorkItem(FrozenModel):
    """What a worker process receives for one attempt."""

    task_id: str
    """Task identity."""
    kind: TaskKind
    """Which judgement."""
    definition: str
    """Problem name."""
    workload_uuid: str = ""
    """Workload (empty: primary)."""
    arch: str
    """Architecture key."""
    source: str
    """Candidate text."""
    source_sha256: str
    """Its hash."""
    language: Language = Language.CUDA
    """The candidate's language: the worker judges it with `language=` (cuda, triton)."""
    timeout_s: float
    """Wall-clock limit for the attempt, seconds."""
    attempt: int = 1
    """1-based attempt number."""


class GpuHealth(FrozenModel):
    """One health reading of one GPU and its worker."""

    gpu: int
    """Physical GPU index."""
    name: str = ""
    """GPU model."""
    temperature_c: int | None = None
    """Core temperature."""
    sm_clock_mhz: int | None = None
    """Current SM clock."""
    max_sm_clock_mhz: int | None = None
    """Maximum SM clock."""
    throttle_reasons: list[str] = Field(default_factory=list)
    """Active clock-event reasons (gpu_idle excluded)."""
    memory_total_bytes: int | None = None
    """Device memory."""
    memory_free_bytes: int | None = None
    """Free device memory."""
    utilization_pct: int | None = None
    """GPU utilisation; between our tasks it is someone else's load."""
    worker_allocated_bytes: int = 0
    """Device memory our worker process holds."""
    resident: dict[str, int] = Field(default_factory=dict)
    """Cached workload states held: `definition/workload_uuid` -> bytes."""
    error: str = ""
    """Why the probe is incomplete, when it is."""

    @property
    def resident_bytes(self) -> int:
        return sum(self.resident.values())

    @property
    def leaked_bytes(self) -> int:
        return max(0, self.worker_allocated_bytes - self.resident_bytes)


class LaneView(FrozenModel):
    """One GPU in /health."""

    gpu: int
    """Physical GPU index."""
    state: LaneState
    """Lane state."""
    condition: GpuCondition
    """Last health verdict."""
    reasons: list[str] = Field(default_factory=list)
    """Why not healthy."""
    worker_pid: int | None = None
    """Persistent worker process."""
    current_task: str | None = None
    """Task running now."""
    tasks_scored: int = 0
    """Attempts whose verdict was kept."""
    tasks_excluded: int = 0
    """Attempts discarded as infrastructure failures."""
    restarts: int = 0
    """Worker replacements."""
    health: GpuHealth | None = None
    """Last reading."""


class HealthView(FrozenModel):
    """GET /health."""

    status: ServiceStatus
    """Overall verdict."""
    version: str
    """Service version."""
    gpus: list[LaneView]
    """Per GPU."""
    pending: int
    """Tasks waiting."""
    running: int
    """Tasks in workers."""
    queue_size: int
    """FIBServe's name for pending."""
