"""Common base for every schema model: frozen, strict, documented fields."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, StringConstraints

NonEmptyString = Annotated[str, StringConstraints(min_length=1)]

SCHEMA_VERSION = 2
"""Version of our record schema (bumped on any incompatible field change; v1 -> v2: typed statistics and
None for unmeasured values, see migrate.py)."""


class FrozenModel(BaseModel):
    """Immutable model; unknown keys are an error; attribute docstrings become field descriptions.

    JSON keeps NaN and infinities as the strings "NaN" / "Infinity" / "-Infinity" (read back as floats):
    pydantic's default writes null, which a float field then rejects, and bare NaN is not JSON."""

    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True,
                              ser_json_inf_nan="strings")
