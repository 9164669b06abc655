"""Status enums shared by every stage. Never booleans or -1 for a verdict."""

from __future__ import annotations

from enum import Enum


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

    @property
    def counts_against_model(self) -> bool:
        return self not in (EvaluationStatus.INFRA_ERROR, EvaluationStatus.NOT_EVALUATED)

    @property
    def is_correct(self) -> bool:
        return self is EvaluationStatus.PASSED


class CompileStatus(str, Enum):
    """Outcome of the CPU compile stage."""

    COMPILED = "COMPILED"
    COMPILE_ERROR = "COMPILE_ERROR"
    REJECTED = "REJECTED"


class SandboxMode(str, Enum):
    """How a candidate's build or run was isolated."""

    BWRAP = "bwrap"
    """Inside a bubblewrap sandbox (ptxcore.sandbox): no network, read-only system, private scratch."""
    UNSANDBOXED = "unsandboxed"
    """Explicit development opt-out (PTXBENCH_UNSANDBOXED=1): not a trustworthy verdict."""


class StaticTarget(str, Enum):
    """Static (disassembly) verdict: are the target instruction families in the binary at all."""

    PRESENT = "present"
    ABSENT = "absent"


class TargetInstruction(str, Enum):
    """Did the architecture's target instructions really execute."""

    EXECUTED = "executed"
    NOT_EXECUTED = "not_executed"
    ABSENT = "absent"
    UNKNOWN = "unknown"


class Language(str, Enum):
    """Solution languages (FlashInfer-Trace's set)."""

    PYTHON = "python"
    TRITON = "triton"
    CPP = "cpp"
    CUDA = "cuda"
    TILELANG = "tilelang"


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
