"""Token counts per pack component, in the layout of the paper's Table 6 (rows = components, one column
per architecture)."""

from __future__ import annotations

from pathlib import Path

from pydantic import Field

from ptxcore.schema import CampaignLanguage, Language
from ptxcore.schema.base import FrozenModel, NonEmptyString

from .packs import load_pack
from .tokens import TokenCounter, default_counter

HARDWARE_LABEL = {"hopper": "H100", "blackwell": "B200"}


class PackTokens(FrozenModel):
    """Token counts of one (arch, language) pack."""

    arch: NonEmptyString
    """Architecture key."""
    language: CampaignLanguage
    """Kernel language of the pack."""
    hardware: NonEmptyString
    """Column label (H100, B200)."""
    parameters: int = Field(ge=0)
    """Rendered parameter tables."""
    templates: int = Field(ge=0)
    """Wrapper headers (with their code fences)."""
    contract: int = Field(ge=0)
    """Contract documents."""
    guidance: int = Field(ge=0)
    """Expert guidance."""
    patterns: dict[str, int]
    """Each scheduling principle."""
    tokenizer: NonEmptyString
    """Tokenizer the counts come from."""

    @property
    def pack_total(self) -> int:
        """Parameters + templates + contract: the paper's per-architecture pack total."""
        return self.parameters + self.templates + self.contract

    @property
    def full_total(self) -> int:
        """The full level used by the guided variants: pack + guidance."""
        return self.pack_total + self.guidance


def pack_tokens(
    arch: str,
    language: Language = Language.CUDA,
    counter: TokenCounter | None = None,
    root: Path | None = None,
) -> PackTokens:
    """Count every component of a pack separately."""
    counter = counter or default_counter()
    pack = load_pack(arch, language, root)
    return PackTokens(
        arch=arch,
        language=language,
        hardware=HARDWARE_LABEL.get(arch, arch),
        parameters=counter.count(pack.params),
        templates=counter.count(pack.templates),
        contract=counter.count(pack.contract),
        guidance=counter.count(pack.guidance),
        patterns={name: counter.count(text) for name, text in sorted(pack.patterns.items())},
        tokenizer=counter.name,
    )


def table6_rows(packs: list[PackTokens]) -> list[tuple[str, list[int | None]]]:
    """(row label, one count per pack) in Table 6 order, then guidance, full level and each pattern."""
    rows: list[tuple[str, list[int | None]]] = [
        ("Parameters", [p.parameters for p in packs]),
        ("Template functions", [p.templates for p in packs]),
        ("Contract", [p.contract for p in packs]),
        ("Total (pack)", [p.pack_total for p in packs]),
        ("+ Expert guidance", [p.guidance for p in packs]),
        ("Full level (pack + guidance)", [p.full_total for p in packs]),
    ]
    names = sorted({n for p in packs for n in p.patterns})
    rows += [(f"+ pattern:{n}", [p.patterns.get(n) for p in packs]) for n in names]
    return rows
