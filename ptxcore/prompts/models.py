"""Prompt variants (data, from YAML) and assembled prompts (what one trajectory sends)."""

from __future__ import annotations

from enum import StrEnum

from pydantic import Field

from ptxcore.schema import CampaignLanguage, Language
from ptxcore.schema.base import FrozenModel, NonEmptyString


class PackComponent(StrEnum):
    """The pack parts a level can name, in prompt order (patterns come last, in the level's order)."""

    PARAMS = "params"
    TEMPLATES = "templates"
    CONTRACT = "contract"
    GUIDANCE = "guidance"


class PackLevel(FrozenModel):
    """A parsed level string such as `params+templates+contract+guidance+pattern:fa3_forward`."""

    components: tuple[PackComponent, ...]
    """Pack parts included, in canonical order; empty for level `none`."""
    patterns: tuple[NonEmptyString, ...] = ()
    """Scheduling-principle components (`pattern:<name>`), in the order given."""

    @property
    def text(self) -> str:
        """The canonical level string (what records store)."""
        parts = [c.value for c in self.components] + [f"pattern:{p}" for p in self.patterns]
        return "+".join(parts) if parts else "none"


class PromptVariant(FrozenModel):
    """One named prompt configuration, chosen by name in a campaign."""

    name: NonEmptyString
    """Unique key, e.g. `hopper-pack`."""
    arch: NonEmptyString
    """Architecture key (`hopper`, `blackwell`)."""
    language: CampaignLanguage = Language.CUDA
    """What the model writes."""
    level: PackLevel
    """Which pack parts the system message carries."""
    default: bool = False
    """One of the three defaults for its (arch, language)."""
    description: str = ""
    """What the variant is for (shown by `ptxbench prompts variants`)."""
    source_file: str = ""
    """YAML file it was loaded from, relative to the knowledge-pack root."""


class AssembledPrompt(FrozenModel):
    """The exact system and user messages of one (variant, problem); byte-identical for equal inputs."""

    variant: NonEmptyString
    """Variant name."""
    problem: NonEmptyString
    """Definition name."""
    arch: NonEmptyString
    """Architecture key."""
    language: CampaignLanguage
    """What the model is asked to write."""
    level: NonEmptyString
    """Canonical level string."""
    system: str
    """System message: instructions + pack at the level + solution example + target line."""
    user: str
    """User message: the definition JSON (without tags) in the fixed template."""
    sha256: str = Field(min_length=64, max_length=64)
    """sha256 of system + NUL + user (the identity stored in turn records)."""
    components: dict[str, int]
    """Token count per component (instructions, params, templates, contract, guidance, pattern:<name>,
    example, target, user), counted separately with `tokenizer`."""
    system_tokens: int = Field(ge=0)
    """Tokens of the whole system message."""
    user_tokens: int = Field(ge=0)
    """Tokens of the whole user message."""
    tokenizer: NonEmptyString
    """Tokenizer used for the counts (e.g. tiktoken:o200k_base)."""
