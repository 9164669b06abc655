"""FlashInfer-Trace Definition: the formal, framework-neutral statement of one operator."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, NonNegativeInt

from .base import FrozenModel, NonEmptyString
from .enums import DType


class AxisConst(FrozenModel):
    """An axis whose size is fixed by the definition."""

    type: Literal["const"] = "const"
    """Discriminator."""
    value: NonNegativeInt
    """The fixed size."""
    description: str | None = None
    """What the axis means."""


class AxisVar(FrozenModel):
    """An axis whose size is set by each workload."""

    type: Literal["var"] = "var"
    """Discriminator."""
    description: str | None = None
    """What the axis means."""


Axis = Annotated[AxisConst | AxisVar, Field(discriminator="type")]


class TensorSpec(FrozenModel):
    """Shape (axis names) and dtype of one input or output; shape None means a scalar."""

    shape: list[NonEmptyString] | None
    """Axis names, outermost first; None for a scalar passed as a plain value."""
    dtype: DType
    """Element type."""
    description: str | None = None
    """What the tensor holds."""


class Definition(FrozenModel):
    """One operator: axes, inputs, outputs and a reference implementation (Python source)."""

    name: NonEmptyString
    """Unique name, e.g. gemm_n7168_k5120."""
    op_type: NonEmptyString
    """Operator family, e.g. gemm or attention."""
    axes: dict[NonEmptyString, Axis]
    """Named axes used by the tensor shapes."""
    inputs: dict[NonEmptyString, TensorSpec]
    """Inputs in calling order."""
    outputs: dict[NonEmptyString, TensorSpec]
    """Outputs in calling order (destination-passing style appends them after the inputs)."""
    reference: NonEmptyString
    """Python source defining `run(*inputs)` that returns the outputs."""
    tags: list[NonEmptyString] = Field(default_factory=list)
    """Free-form labels."""
    description: str | None = None
    """Human description."""
    constraints: list[NonEmptyString] = Field(default_factory=list)
    """Python expressions over the axes that every workload satisfies."""

    def const_axes(self) -> dict[str, int]:
        return {k: a.value for k, a in self.axes.items() if isinstance(a, AxisConst)}

    def var_axes(self) -> list[str]:
        return [k for k, a in self.axes.items() if isinstance(a, AxisVar)]

    def resolve_shape(self, spec: TensorSpec, axes: dict[str, int]) -> tuple[int, ...] | None:
        """Concrete shape of `spec` for the given workload axis values (const axes filled in)."""
        if spec.shape is None:
            return None
        values = {**self.const_axes(), **axes}
        missing = [a for a in spec.shape if a not in values]
        if missing:
            raise ValueError(f"{self.name}: no value for axes {missing}")
        return tuple(values[a] for a in spec.shape)

    def prompt_json(self) -> dict:
        """The definition as shown to a model: everything except tags."""
        return self.model_dump(mode="json", exclude={"tags"})
