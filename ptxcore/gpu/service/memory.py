"""Device-memory needs of a task, from the definition's shapes (no torch): what the resident workload
state takes (inputs + reference outputs) and what one candidate attempt adds on top (its outputs, the
poisoned copies, the rotating input buffers and the L2-flush buffer)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from ptxcore.problems import Problem
from ptxcore.schema import DType

_DTYPE_BYTES: dict[DType, float] = {
    DType.FLOAT32: 4, DType.FLOAT16: 2, DType.BFLOAT16: 2, DType.FLOAT8_E4M3FN: 1, DType.FLOAT8_E5M2: 1,
    DType.FLOAT4_E2M1: 0.5, DType.INT64: 8, DType.INT32: 4, DType.INT16: 2, DType.INT8: 1, DType.BOOL: 1,
}

L2_FLUSH_BYTES = 256 << 20
"""The judge's L2-flush buffer (well above the H200's 60 MB L2)."""


@dataclass(frozen=True)
class MemoryNeed:
    """Bytes one task needs on a GPU."""

    state_key: str
    """`definition/workload_uuid`: what a worker keeps resident between candidates."""
    state_bytes: int
    """Inputs plus reference outputs (needed only where the state is not resident yet)."""
    transient_bytes: int
    """Needed by every attempt in addition."""


def _tensor_bytes(problem: Problem, names: dict, axes: dict[str, int]) -> int:
    total = 0.0
    for spec in names.values():
        shape = problem.definition.resolve_shape(spec, axes)
        if shape is None:
            continue
        total += math.prod(shape) * _DTYPE_BYTES[spec.dtype]
    return int(total)


def memory_need(problem: Problem, workload_uuid: str | None, *, input_copies: int = 2,
                output_copies: int = 3) -> MemoryNeed:
    """Estimate for one task. input_copies: rotating input sets per attempt (fresh inputs per trial);
    output_copies: candidate outputs, poisoned buffers and comparison scratch."""
    workload = problem.workload(workload_uuid)
    inputs = _tensor_bytes(problem, problem.definition.inputs, workload.axes)
    outputs = _tensor_bytes(problem, problem.definition.outputs, workload.axes)
    return MemoryNeed(
        state_key=f"{problem.name}/{workload.uuid}",
        state_bytes=inputs + outputs,
        transient_bytes=input_copies * inputs + output_copies * outputs + L2_FLUSH_BYTES,
    )
