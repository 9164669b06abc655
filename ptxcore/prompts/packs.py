"""Knowledge packs on disk: per-(arch, language) manifests, parameters, headers, contracts, patterns.

Layout (all paths in manifests are relative to the pack root):
    knowledge_packs/<arch>/pack.yaml        CUDA pack of an architecture
    knowledge_packs/triton/<arch>.yaml      Triton pack of an architecture
    knowledge_packs/guidance/*.md           expert guidance (shared)
    knowledge_packs/patterns/<name>.md      scheduling principles, named `pattern:<name>` in levels
    knowledge_packs/shared/                 system instructions, user templates, solution examples
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import yaml
from pydantic import Field, ValidationError

from ptxcore.schema import CampaignLanguage, Language
from ptxcore.schema.base import FrozenModel, NonEmptyString


class PackError(ValueError):
    """A knowledge-pack file is missing or malformed."""


class ParameterRow(FrozenModel):
    """One hardware parameter and where it comes from."""

    name: NonEmptyString
    """What is measured, with its unit where the value has none."""
    value: NonEmptyString
    """The value as shown to the model."""
    source: NonEmptyString
    """Document (or measurement) the value is taken from."""


class ParameterSection(FrozenModel):
    """A titled table of parameters."""

    title: NonEmptyString
    """Table heading."""
    rows: tuple[ParameterRow, ...] = Field(min_length=1)
    """The parameters."""


class ParameterSheet(FrozenModel):
    """`parameters.yaml` of an architecture."""

    gpu: NonEmptyString
    """Which product the values describe."""
    sections: tuple[ParameterSection, ...] = Field(min_length=1)
    """Tables in prompt order."""


class PackManifest(FrozenModel):
    """`pack.yaml`: which files make up each component of one (arch, language) pack."""

    arch: NonEmptyString
    """Architecture key."""
    language: CampaignLanguage = Language.CUDA
    """Kernel language the pack serves."""
    target_line: NonEmptyString
    """The sentence naming the target architecture (last line of the system message)."""
    parameters: NonEmptyString
    """Parameter sheet (YAML)."""
    templates: tuple[NonEmptyString, ...] = ()
    """Wrapper headers, in prompt order."""
    contract: tuple[NonEmptyString, ...] = ()
    """Contract documents (markdown), in prompt order."""
    guidance: tuple[NonEmptyString, ...] = ("guidance/expert_rules.md",)
    """Expert guidance documents."""
    patterns: dict[str, NonEmptyString] = Field(default_factory=dict)
    """Scheduling principles available as `pattern:<name>`: name -> markdown file."""
    instructions: NonEmptyString = "shared/system_cuda.md"
    """System instructions."""
    example: NonEmptyString = "shared/tvm_ffi_example.cu"
    """Solution example appended after the pack."""
    user_template: NonEmptyString = "shared/user_cuda.txt"
    """User message template with a `{definition}` slot."""


def default_pack_root() -> Path:
    """$PTXBENCH_KNOWLEDGE_PACKS_DIR, else the repository's knowledge_packs/ folder."""
    env = os.environ.get("PTXBENCH_KNOWLEDGE_PACKS_DIR")
    return Path(env) if env else Path(__file__).resolve().parents[2] / "knowledge_packs"


def _read(root: Path, rel: str) -> str:
    path = root / rel
    if not path.is_file():
        raise PackError(f"knowledge-pack file missing: {rel} (under {root})")
    return path.read_text()


def _yaml(root: Path, rel: str) -> object:
    try:
        return yaml.safe_load(_read(root, rel))
    except yaml.YAMLError as exc:
        raise PackError(f"{rel}: invalid YAML: {exc}") from exc


def manifest_path(arch: str, language: Language) -> str:
    return f"{arch}/pack.yaml" if language is Language.CUDA else f"triton/{arch}.yaml"


@lru_cache(maxsize=16)
def _load_manifest(root: Path, arch: str, language: Language) -> PackManifest:
    rel = manifest_path(arch, language)
    try:
        manifest = PackManifest.model_validate(_yaml(root, rel))
    except ValidationError as exc:
        raise PackError(f"{rel}: {exc.errors()[0]['loc']}: {exc.errors()[0]['msg']}") from exc
    if manifest.arch != arch or manifest.language is not language:
        raise PackError(
            f"{rel} declares {manifest.arch}/{manifest.language.value}, expected {arch}/{language.value}"
        )
    return manifest


def load_manifest(arch: str, language: Language, root: Path | None = None) -> PackManifest:
    """The manifest of the (arch, language) pack."""
    return _load_manifest((root or default_pack_root()).resolve(), arch, language)


def load_parameters(rel: str, root: Path | None = None) -> ParameterSheet:
    """A parameter sheet, validated (every row has a source)."""
    root = root or default_pack_root()
    try:
        return ParameterSheet.model_validate(_yaml(root, rel))
    except ValidationError as exc:
        raise PackError(f"{rel}: {exc.errors()[0]['loc']}: {exc.errors()[0]['msg']}") from exc


@dataclass(frozen=True)
class PackText:
    """Rendered text of each component of one pack (what the prompt is built from)."""

    manifest: PackManifest
    params: str
    templates: str
    contract: str
    guidance: str
    patterns: dict[str, str]
    instructions: str
    example: str
    user_template: str


def render_parameters(sheet: ParameterSheet) -> str:
    """Markdown tables (sources stay in the YAML; they are for reviewers, not for the model)."""
    out = [f"# Hardware parameters: {sheet.gpu}\n"]
    for section in sheet.sections:
        out.append(f"\n## {section.title}\n\n| Parameter | Value |\n|---|---|\n")
        out.extend(f"| {row.name} | {row.value} |\n" for row in section.rows)
    return "".join(out)


def _fence(language: str, name: str, body: str) -> str:
    return f"### {name}\n```{language}\n{body.rstrip()}\n```\n"


def _render_templates(root: Path, files: tuple[str, ...]) -> str:
    if not files:
        return ""
    head = (
        "# PTX wrapper functions\n\nTested wrappers (they compile for the target with nvcc and are exercised "
        "on the GPU). Copy the ones you use into your .cu file, in this order; they assume `#include <cstdint>`.\n\n"
    )
    return head + "\n".join(_fence("cpp", Path(rel).name, _read(root, rel)) for rel in files)


def _join_docs(root: Path, files: tuple[str, ...]) -> str:
    return "\n\n".join(_read(root, rel).rstrip() + "\n" for rel in files)


def load_pack(arch: str, language: Language, root: Path | None = None) -> PackText:
    """Read and render every component of a pack."""
    root = (root or default_pack_root()).resolve()
    m = load_manifest(arch, language, root)
    example_lang = "cpp" if language is Language.CUDA else "python"
    example = (
        "# Solution example\n\nThe required file structure and binding, on a trivial operator:\n\n"
        + _fence(example_lang, Path(m.example).name, _read(root, m.example))
    )
    return PackText(
        manifest=m,
        params=render_parameters(load_parameters(m.parameters, root)),
        templates=_render_templates(root, m.templates),
        contract=_join_docs(root, m.contract),
        guidance=_join_docs(root, m.guidance),
        patterns={name: _read(root, rel).rstrip() + "\n" for name, rel in m.patterns.items()},
        instructions=_read(root, m.instructions).rstrip() + "\n",
        example=example,
        user_template=_read(root, m.user_template),
    )


_INCLUDE = re.compile(r'^#include "([^"]+)"[ \t]*$', re.MULTILINE)
_PRAGMA_ONCE = re.compile(r"^#pragma once[ \t]*\n", re.MULTILINE)


def expand_pack_includes(path: Path, _seen: frozenset[Path] = frozenset()) -> str:
    """Inline `#include "relative/path"` lines (recursively) to get one self-contained source file.

    Pack examples include the pack headers by relative path so that they are built from exactly the
    wrappers the model sees; candidates must be a single file, so tests and the judge use this text.
    """
    path = path.resolve()
    if path in _seen:
        raise PackError(f"include cycle through {path.name}")

    def inline(match: re.Match[str]) -> str:
        target = (path.parent / match.group(1)).resolve()
        if not target.is_file():
            raise PackError(f"{path.name}: included file not found: {match.group(1)}")
        body = _PRAGMA_ONCE.sub("", expand_pack_includes(target, _seen | {path}))
        return f"// ---- begin {target.name} ----\n{body.rstrip()}\n// ---- end {target.name} ----"

    return _INCLUDE.sub(inline, path.read_text())
