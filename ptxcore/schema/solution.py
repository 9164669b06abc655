"""FlashInfer-Trace Solution: a candidate implementation of one definition."""

from __future__ import annotations

import hashlib

from pydantic import Field

from .base import FrozenModel, NonEmptyString
from .enums import Binding, Language


class SourceFile(FrozenModel):
    """One source file of a solution."""

    path: NonEmptyString
    """Relative path, e.g. kernel.cu."""
    content: NonEmptyString
    """Full text."""


class BuildSpec(FrozenModel):
    """How to build and call the solution."""

    language: Language
    """Source language."""
    target_hardware: list[str] = Field(min_length=1)
    """Hardware names, e.g. H100 or Blackwell."""
    entry_point: NonEmptyString
    """`file::function`, e.g. kernel.cu::run."""
    dependencies: list[NonEmptyString] = Field(default_factory=list)
    """Extra libraries required (the judge rejects forbidden ones)."""
    destination_passing_style: bool = True
    """Outputs are passed in as pre-allocated tensors after the inputs."""
    binding: Binding | None = None
    """FFI binding for compiled languages."""


class Solution(FrozenModel):
    """A candidate implementation."""

    name: NonEmptyString
    """Solution name."""
    definition: NonEmptyString
    """Name of the definition it implements."""
    author: NonEmptyString
    """Who wrote it (model name, person)."""
    spec: BuildSpec
    """Build specification."""
    sources: list[SourceFile] = Field(min_length=1)
    """Source files."""
    description: str | None = None
    """Free text."""

    def content_sha256(self) -> str:
        """Content identity over all source files (path and text)."""
        h = hashlib.sha256()
        for f in sorted(self.sources, key=lambda s: s.path):
            h.update(f.path.encode())
            h.update(b"\0")
            h.update(f.content.encode())
            h.update(b"\0")
        return h.hexdigest()
