"""Knowledge packs and prompt assembly (issue 5). Light: no torch, duckdb or litellm imports.

from ptxcore.prompts import load_variant, list_variants, default_variants, assemble_prompt
prompt = assemble_prompt(load_variant("hopper-pack"), get_problem("gemm_n7168_k5120"))
prompt.system, prompt.user, prompt.sha256, prompt.components
"""

from .assemble import assemble_prompt, definition_text, pack_sections, prompt_sha256, system_sections
from .models import AssembledPrompt, PackComponent, PackLevel, PromptVariant
from .packs import (
    PackError,
    PackManifest,
    PackText,
    ParameterSheet,
    default_pack_root,
    expand_pack_includes,
    load_manifest,
    load_pack,
    load_parameters,
    render_parameters,
)
from .tokens import TiktokenCounter, TokenCounter, TokenizerUnavailableError, default_counter
from .variants import (
    LevelError,
    UnknownVariantError,
    all_variants,
    default_variants,
    list_variants,
    load_variant,
    parse_level,
)

__all__ = [
    "assemble_prompt",
    "definition_text",
    "pack_sections",
    "prompt_sha256",
    "system_sections",
    "AssembledPrompt",
    "PackComponent",
    "PackLevel",
    "PromptVariant",
    "PackError",
    "PackManifest",
    "PackText",
    "ParameterSheet",
    "default_pack_root",
    "expand_pack_includes",
    "load_manifest",
    "load_pack",
    "load_parameters",
    "render_parameters",
    "TokenCounter",
    "TokenizerUnavailableError",
    "TiktokenCounter",
    "default_counter",
    "LevelError",
    "UnknownVariantError",
    "all_variants",
    "default_variants",
    "list_variants",
    "load_variant",
    "parse_level",
]
