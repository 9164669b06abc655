"""Architecture registry: targets, build flags and the SASS instruction families that prove their use."""

from .registry import (
    ARCHITECTURES,
    Architecture,
    InstructionFamily,
    UnknownArchitectureError,
    architecture_for_capability,
    get_architecture,
)

__all__ = [
    "ARCHITECTURES", "Architecture", "InstructionFamily", "UnknownArchitectureError", "architecture_for_capability",
    "get_architecture",
]
