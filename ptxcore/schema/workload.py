"""FlashInfer-Trace Workload: concrete axis values and where each input comes from."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, NonNegativeInt

from .base import FrozenModel, NonEmptyString


class RandomInput(FrozenModel):
    """Input generated at evaluation time (our extension file says from which distribution)."""

    type: Literal["random"] = "random"
    """Discriminator."""


class ScalarInput(FrozenModel):
    """Input passed as a plain value."""

    type: Literal["scalar"] = "scalar"
    """Discriminator."""
    value: int | float | bool
    """The value."""


class SafetensorsInput(FrozenModel):
    """Input loaded from a safetensors file."""

    type: Literal["safetensors"] = "safetensors"
    """Discriminator."""
    path: NonEmptyString
    """File path, relative to the dataset root."""
    tensor_key: NonEmptyString
    """Key inside the file."""


InputSpec = Annotated[RandomInput | ScalarInput | SafetensorsInput, Field(discriminator="type")]


class Workload(FrozenModel):
    """One concrete instance of a definition."""

    axes: dict[str, NonNegativeInt]
    """Values of the definition's variable axes."""
    inputs: dict[str, InputSpec]
    """Source of every input."""
    uuid: NonEmptyString
    """Stable identity."""
    outputs: dict[str, SafetensorsInput] | None = None
    """Stored expected outputs, when any."""
