"""Prompt variants are data: `knowledge_packs/variants/*.yaml`, each a list of variants."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import yaml
from pydantic import ValidationError

from ptxcore.schema import Language

from .models import PackComponent, PackLevel, PromptVariant
from .packs import PackError, default_pack_root, load_manifest

VARIANTS_DIR = "variants"
DEFAULTS_PER_ARCH_LANGUAGE = 3


class UnknownVariantError(KeyError):
    """No variant of that name."""

    def __str__(self) -> str:
        return str(self.args[0])


class LevelError(ValueError):
    """A malformed level string."""


_ORDER = {c: i for i, c in enumerate(PackComponent)}


def parse_level(text: str) -> PackLevel:
    """`params+templates+contract+guidance+pattern:x` -> PackLevel. `none` means no pack at all.

    Components may be given in any order and are put in canonical order; patterns keep their order.
    """
    text = text.strip()
    if text in ("", "none"):
        return PackLevel(components=())
    components: list[PackComponent] = []
    patterns: list[str] = []
    for part in (p.strip() for p in text.split("+")):
        if part.startswith("pattern:") and part[len("pattern:") :]:
            patterns.append(part[len("pattern:") :])
            continue
        try:
            comp = PackComponent(part)
        except ValueError:
            known = ", ".join(c.value for c in PackComponent)
            raise LevelError(
                f"unknown level part {part!r} in {text!r} (known: {known}, pattern:<name>)"
            ) from None
        if comp in components:
            raise LevelError(f"level part {part!r} repeated in {text!r}")
        components.append(comp)
    if len(set(patterns)) != len(patterns):
        raise LevelError(f"a pattern is repeated in {text!r}")
    return PackLevel(components=tuple(sorted(components, key=_ORDER.__getitem__)), patterns=tuple(patterns))


def _parse_file(root: Path, path: Path) -> list[PromptVariant]:
    rel = path.relative_to(root).as_posix()
    try:
        raw = yaml.safe_load(path.read_text())
    except yaml.YAMLError as exc:
        raise PackError(f"{rel}: invalid YAML: {exc}") from exc
    if not isinstance(raw, list):
        raise PackError(f"{rel}: expected a list of variants")
    out = []
    for i, item in enumerate(raw):
        if not isinstance(item, dict):
            raise PackError(f"{rel}[{i}]: expected a mapping")
        data = {**item, "level": parse_level(str(item.get("level", ""))), "source_file": rel}
        try:
            out.append(PromptVariant.model_validate(data))
        except ValidationError as exc:
            err = exc.errors()[0]
            raise PackError(f"{rel}[{i}]: {'.'.join(map(str, err['loc']))}: {err['msg']}") from exc
    return out


def _check(variant: PromptVariant, root: Path) -> None:
    manifest = load_manifest(variant.arch, variant.language, root)
    files = {
        PackComponent.TEMPLATES: manifest.templates,
        PackComponent.CONTRACT: manifest.contract,
        PackComponent.GUIDANCE: manifest.guidance,
    }
    empty = [c.value for c in variant.level.components if c in files and not files[c]]
    if empty:
        raise PackError(
            f"variant {variant.name}: the {variant.arch}/{variant.language.value} pack has no {empty[0]}"
        )
    missing = [p for p in variant.level.patterns if p not in manifest.patterns]
    if missing:
        raise PackError(
            f"variant {variant.name}: pattern {missing[0]!r} not in the {variant.arch}/{variant.language.value} "
            f"pack (available: {', '.join(sorted(manifest.patterns)) or 'none'})"
        )


@lru_cache(maxsize=8)
def _load_all(root: Path) -> dict[str, PromptVariant]:
    folder = root / VARIANTS_DIR
    if not folder.is_dir():
        raise PackError(f"no variants folder {folder}")
    variants: dict[str, PromptVariant] = {}
    for path in sorted(folder.glob("*.yaml")):
        for v in _parse_file(root, path):
            if v.name in variants:
                raise PackError(
                    f"variant {v.name} defined twice ({variants[v.name].source_file}, {v.source_file})"
                )
            _check(v, root)
            variants[v.name] = v
    return variants


def all_variants(root: Path | None = None) -> dict[str, PromptVariant]:
    """Every variant by name (validated against the packs)."""
    return _load_all((root or default_pack_root()).resolve())


def load_variant(name: str, root: Path | None = None) -> PromptVariant:
    """The variant called `name`."""
    variants = all_variants(root)
    if name not in variants:
        raise UnknownVariantError(f"unknown prompt variant {name!r} (see `ptxbench prompts variants`)")
    return variants[name]


def list_variants(
    arch: str | None = None, language: str | None = None, root: Path | None = None
) -> list[PromptVariant]:
    """Variants, optionally filtered by architecture key and language, sorted by name."""
    lang = Language(language) if language is not None else None
    return sorted(
        (
            v
            for v in all_variants(root).values()
            if (arch is None or v.arch == arch) and (lang is None or v.language is lang)
        ),
        key=lambda v: v.name,
    )


def default_variants(arch: str, language: str = "cuda", root: Path | None = None) -> list[str]:
    """Names of the three default variants of (arch, language), in file order."""
    lang = Language(language)
    names = [
        v.name for v in all_variants(root).values() if v.default and v.arch == arch and v.language is lang
    ]
    if len(names) != DEFAULTS_PER_ARCH_LANGUAGE:
        raise PackError(
            f"{arch}/{lang.value}: expected {DEFAULTS_PER_ARCH_LANGUAGE} default variants, found {len(names)}"
        )
    return names
