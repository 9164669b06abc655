"""Prompt assembly: deterministic text from (variant, problem, pack files).

system = instructions
         + "## Reference material" + pack components at the variant's level
         + solution example + one line naming the target architecture
user   = the definition JSON without tags (json.dumps, indent 2) in the language's fixed template
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from ptxcore.problems import Problem

from .models import AssembledPrompt, PackComponent, PromptVariant
from .packs import PackText, load_pack
from .tokens import TokenCounter, default_counter

REFERENCE_HEADING = "\n## Reference material\n\n"


def definition_text(problem: Problem) -> str:
    """The definition as shown to the model: every field but tags, 2-space JSON, ASCII escapes off."""
    return json.dumps(problem.definition.prompt_json(), indent=2, ensure_ascii=False)


def pack_sections(variant: PromptVariant, pack: PackText) -> list[tuple[str, str]]:
    """(component name, text) in prompt order for the variant's level; empty components are skipped."""
    by_component = {
        PackComponent.PARAMS: pack.params,
        PackComponent.TEMPLATES: pack.templates,
        PackComponent.CONTRACT: pack.contract,
        PackComponent.GUIDANCE: pack.guidance,
    }
    out = [(c.value, by_component[c]) for c in variant.level.components if by_component[c].strip()]
    out += [(f"pattern:{name}", pack.patterns[name]) for name in variant.level.patterns]
    return out


def system_sections(variant: PromptVariant, pack: PackText) -> list[tuple[str, str]]:
    """Every named part of the system message, in order; joined with blank lines they are the message."""
    sections = [("instructions", pack.instructions + REFERENCE_HEADING.rstrip("\n") + "\n")]
    sections += pack_sections(variant, pack)
    sections.append(("example", pack.example))
    sections.append(("target", pack.manifest.target_line.strip() + "\n"))
    return sections


def prompt_sha256(system: str, user: str) -> str:
    return hashlib.sha256(system.encode() + b"\0" + user.encode()).hexdigest()


def assemble_prompt(
    variant: PromptVariant, problem: Problem, counter: TokenCounter | None = None, root: Path | None = None
) -> AssembledPrompt:
    """The system and user messages of one trajectory, their hash and per-component token counts."""
    pack = load_pack(variant.arch, variant.language, root)
    sections = system_sections(variant, pack)
    system = "\n".join(text for _, text in sections)
    user = pack.user_template.replace("{definition}", definition_text(problem))
    counter = counter or default_counter()
    components = {name: counter.count(text) for name, text in sections}
    components["user"] = counter.count(user)
    return AssembledPrompt(
        variant=variant.name,
        problem=problem.name,
        arch=variant.arch,
        language=variant.language,
        level=variant.level.text,
        system=system,
        user=user,
        sha256=prompt_sha256(system, user),
        components=components,
        system_tokens=counter.count(system),
        user_tokens=components["user"],
        tokenizer=counter.name,
    )
