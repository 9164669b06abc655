"""Status enums shared by every stage. Never booleans or -1 for a verdict."""

from __future__ import annotations

from collections.abc import Callable
from enum import Enum
from typing import Annotated

from pydantic import AfterValidator


class EvaluationStatus(str, Enum):
    """Verdict of one evaluation: FlashInfer-Trace's statuses plus ours."""

    PASSED = "PASSED"
    INCORRECT_SHAPE = "INCORRECT_SHAPE"
    INCORRECT_NUMERICAL = "INCORRECT_NUMERICAL"
    INCORRECT_DTYPE = "INCORRECT_DTYPE"
    RUNTIME_ERROR = "RUNTIME_ERROR"
    COMPILE_ERROR = "COMPILE_ERROR"
    TIMEOUT = "TIMEOUT"
    # ours
    REJECTED = "REJECTED"
    """Forbidden source or library use (cuBLAS/cuDNN/FlashInfer headers, links or dlopen)."""
    REWARD_HACK = "REWARD_HACK"
    """Output or timing manipulation detected."""
    INFRA_ERROR = "INFRA_ERROR"
    """Our fault; never counted against the model; excluded and retried."""
    NOT_EVALUATED = "NOT_EVALUATED"
    """No GPU judge was available; the turn carries no correctness or timing."""
    EXTRACTION_ERROR = "EXTRACTION_ERROR"
    """The model's answer held no single code block to judge (counts against the model)."""
    SANITIZE_CLEAN = "SANITIZE_CLEAN"
    """Tool-only service task (/sanitize): memcheck found no error. Correctness was not judged."""
    PROFILED = "PROFILED"
    """Tool-only service task (/profile): target-instruction evidence only. Correctness was not judged."""

    @property
    def counts_against_model(self) -> bool:
        return self not in _NOT_A_VERDICT

    @property
    def is_tool_only(self) -> bool:
        """A status of a tool-only service task, never of a turn."""
        return self in (EvaluationStatus.SANITIZE_CLEAN, EvaluationStatus.PROFILED)

    @property
    def is_correct(self) -> bool:
        return self is EvaluationStatus.PASSED


_NOT_A_VERDICT = frozenset({EvaluationStatus.INFRA_ERROR, EvaluationStatus.NOT_EVALUATED,
                            EvaluationStatus.SANITIZE_CLEAN, EvaluationStatus.PROFILED})


class CompileStatus(str, Enum):
    """Outcome of the CPU compile stage."""

    COMPILED = "COMPILED"
    COMPILE_ERROR = "COMPILE_ERROR"
    REJECTED = "REJECTED"

    @property
    def verdict(self) -> EvaluationStatus | None:
        """Fold rule 1, the only copy: the final verdict of a kernel that did not build (no judge runs);
        None for a compiled kernel, whose verdict is the judge's."""
        return _COMPILE_VERDICT.get(self)


_COMPILE_VERDICT = {CompileStatus.COMPILE_ERROR: EvaluationStatus.COMPILE_ERROR,
                    CompileStatus.REJECTED: EvaluationStatus.REJECTED}


class SandboxMode(str, Enum):
    """How a candidate's build or run was isolated."""

    BWRAP = "bwrap"
    """Inside a bubblewrap sandbox (ptxcore.sandbox): no network, read-only system, private scratch."""
    UNSANDBOXED = "unsandboxed"
    """Explicit development opt-out (PTXBENCH_UNSANDBOXED=1): not a trustworthy verdict."""


class TargetInstruction(str, Enum):
    """Did the architecture's target instructions really execute."""

    EXECUTED = "executed"
    NOT_EXECUTED = "not_executed"
    ABSENT = "absent"
    UNKNOWN = "unknown"


class StaticTarget(str, Enum):
    """Static (disassembly) verdict: are the target instruction families in the binary at all."""

    PRESENT = "present"
    ABSENT = "absent"

    @staticmethod
    def instruction(static: StaticTarget | None) -> TargetInstruction:
        """Fold rule 2, the only copy: what is known without running. Absent families are a proof of
        absence; present ones (or no binary inspected) say nothing about execution."""
        return TargetInstruction.ABSENT if static is StaticTarget.ABSENT else TargetInstruction.UNKNOWN


class Language(str, Enum):
    """Solution languages (FlashInfer-Trace's set). The one language enum: prompts, campaigns, the agent's
    code fence and the judge all use it; a campaign asks for `cuda` (C++ with inline PTX) or `triton`."""

    PYTHON = "python"
    TRITON = "triton"
    CPP = "cpp"
    CUDA = "cuda"
    TILELANG = "tilelang"

    @property
    def fence(self) -> str:
        """The code-fence tag an answer in this language uses."""
        return "cpp" if self in (Language.CUDA, Language.CPP) else "python"

    @property
    def source_file(self) -> str:
        """The candidate's file name (the solution entry point's file)."""
        return "kernel.cu" if self in (Language.CUDA, Language.CPP) else "kernel.py"


CAMPAIGN_LANGUAGES = (Language.CUDA, Language.TRITON)
"""Languages a campaign (and a prompt variant) can ask a model to write."""

JUDGED_LANGUAGES = frozenset({Language.CUDA, Language.TRITON})
"""Languages the CPU stage and the GPU judge take (`ptxcore.compile.build_candidate`): CUDA is built by nvcc,
Triton validated on the CPU and compiled at its first launch on the GPU host. Any other language is
NOT_EVALUATED (never a COMPILE_ERROR charged to the model)."""


def _language_in(allowed: tuple[Language, ...], who: str) -> Callable[[Language], Language]:
    """A pydantic after-validator that accepts only `allowed`."""

    def check(value: Language) -> Language:
        if value not in allowed:
            raise ValueError(f"language {value.value!r}: {who} one of {', '.join(x.value for x in allowed)}")
        return value

    return check


CampaignLanguage = Annotated[Language, AfterValidator(_language_in(CAMPAIGN_LANGUAGES, "a campaign asks for"))]
"""A Language field that accepts only what a model is asked to write (cuda, triton)."""
JudgedLanguage = Annotated[Language, AfterValidator(_language_in(
    tuple(sorted(JUDGED_LANGUAGES, key=lambda x: x.value)), "the judge takes"))]
"""A Language field that accepts only what the judge takes (cuda, triton): requests to the profiling service."""


class Binding(str, Enum):
    """How a compiled solution is called."""

    TVM_FFI = "tvm-ffi"
    TORCH = "torch"


class DType(str, Enum):
    """Tensor element types (FlashInfer-Trace's set)."""

    FLOAT32 = "float32"
    FLOAT16 = "float16"
    BFLOAT16 = "bfloat16"
    FLOAT8_E4M3FN = "float8_e4m3fn"
    FLOAT8_E5M2 = "float8_e5m2"
    FLOAT4_E2M1 = "float4_e2m1"
    INT64 = "int64"
    INT32 = "int32"
    INT16 = "int16"
    INT8 = "int8"
    BOOL = "bool"
