"""`ptxbench prompts show|tokens|variants`: inspect knowledge packs and assembled prompts."""

from __future__ import annotations

import json

import typer

from .errors import UserError, one_line_errors
from .output import add_row, print_table, table

app = typer.Typer(help="Knowledge packs, prompt variants and assembled prompts.", no_args_is_help=True)

TOKENIZER_NOTE = "model tokenizers (e.g. Qwen's) give different counts"


def _errors():
    from ptxcore.prompts import LevelError, PackError, TokenizerUnavailableError, UnknownVariantError

    return (LevelError, PackError, TokenizerUnavailableError, UnknownVariantError)


def _variant(variant: str | None, arch: str | None, level: str | None, language: str):
    """A named variant, or an ad-hoc one from --arch/--level/--language."""
    from ptxcore.arch import get_architecture
    from ptxcore.prompts import PromptVariant, load_variant, parse_level
    from ptxcore.schema import Language

    if variant is not None:
        if level is not None or arch is not None:
            raise UserError("give either --variant or --arch/--level, not both")
        return load_variant(variant)
    if arch is None:
        raise UserError("--arch is required without --variant")
    try:
        lang = Language(language)
    except ValueError:
        raise UserError(f"unknown --language {language!r} (cuda or triton)") from None
    key = get_architecture(arch).key
    parsed = parse_level(level if level is not None else "params+templates+contract")
    return PromptVariant(name=f"{key}-{lang.value}-adhoc", arch=key, language=lang, level=parsed)


@app.command("show")
@one_line_errors
def show(
    problem: str = typer.Option(..., "--problem", "-p", help="Definition name, e.g. gemm_n7168_k5120."),
    arch: str = typer.Option(None, "--arch", "-a", help="hopper | blackwell (or an alias: h100, b200)."),
    level: str = typer.Option(
        None,
        "--level",
        "-l",
        help="params, params+templates, params+templates+contract, ...+guidance, ...+pattern:<name>, or none.",
    ),
    language: str = typer.Option("cuda", "--language", help="cuda or triton."),
    variant: str = typer.Option(None, "--variant", "-v", help="A named variant instead of --arch/--level."),
    part: str = typer.Option("both", "--part", help="system, user or both."),
    as_json: bool = typer.Option(False, "--json", help="Print the whole assembled prompt as JSON."),
) -> None:
    """Print the exact system and user messages a trajectory would send."""
    from ptxcore.problems import get_problem
    from ptxcore.prompts import assemble_prompt

    if part not in ("system", "user", "both"):
        raise UserError(f"--part must be system, user or both, not {part!r}")
    try:
        prompt = assemble_prompt(_variant(variant, arch, level, language), get_problem(problem))
    except _errors() as exc:
        raise UserError(str(exc)) from exc
    if as_json:
        typer.echo(prompt.model_dump_json(indent=1))
        return
    if part in ("system", "both"):
        typer.echo(prompt.system if part == "system" else f"===== system =====\n{prompt.system}")
    if part in ("user", "both"):
        typer.echo(prompt.user if part == "user" else f"===== user =====\n{prompt.user}")
    if part == "both":
        typer.echo(
            f"===== {prompt.variant} | level {prompt.level} | sha256 {prompt.sha256[:16]} | "
            f"system {prompt.system_tokens} + user {prompt.user_tokens} tokens ({prompt.tokenizer}) =====",
            err=True,
        )


@app.command("tokens")
@one_line_errors
def tokens(
    arch: list[str] = typer.Option(
        ["hopper", "blackwell"], "--arch", "-a", help="Architectures (repeatable)."
    ),
    language: str = typer.Option("cuda", "--language", help="cuda or triton."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON instead of a table."),
) -> None:
    """Token counts per pack component, in the layout of the paper's Table 6."""
    from ptxcore.arch import get_architecture
    from ptxcore.prompts.report import pack_tokens, table6_rows
    from ptxcore.schema import Language

    try:
        lang = Language(language)
    except ValueError:
        raise UserError(f"unknown --language {language!r} (cuda or triton)") from None
    try:
        packs = [pack_tokens(get_architecture(a).key, lang) for a in arch]
    except _errors() as exc:
        raise UserError(str(exc)) from exc
    tokenizer = packs[0].tokenizer
    if as_json:
        payload = {
            "tokenizer": tokenizer,
            "note": TOKENIZER_NOTE,
            "packs": [
                p.model_dump(mode="json") | {"pack_total": p.pack_total, "full_total": p.full_total}
                for p in packs
            ],
        }
        typer.echo(json.dumps(payload, indent=1))
        return
    hardware = [p.hardware for p in packs]
    t = table(f"Knowledge-pack tokens ({lang.value}; tokenizer {tokenizer}; {TOKENIZER_NOTE})",
              ["Component", *hardware], right=hardware)
    for label, values in table6_rows(packs):
        add_row(t, label, *("n/a" if v is None else f"{v:,}" for v in values))
    print_table(t)


@app.command("variants")
@one_line_errors
def variants(
    arch: str = typer.Option(None, "--arch", "-a", help="Only this architecture."),
    language: str = typer.Option(None, "--language", help="Only cuda or triton."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON instead of a table."),
) -> None:
    """List the prompt variants (YAML data under knowledge_packs/variants/)."""
    from ptxcore.arch import get_architecture
    from ptxcore.prompts import list_variants

    if language not in (None, "cuda", "triton"):
        raise UserError(f"unknown --language {language!r} (cuda or triton)")
    key = get_architecture(arch).key if arch else None
    try:
        found = list_variants(key, language)
    except _errors() as exc:
        raise UserError(str(exc)) from exc
    if as_json:
        typer.echo(json.dumps([v.model_dump(mode="json") | {"level": v.level.text} for v in found], indent=1))
        return
    t = table(f"{len(found)} prompt variants", ("name", "arch", "language", "default", "level"), ids=("name", "level"))
    for v in found:
        add_row(t, v.name, v.arch, v.language.value, "yes" if v.default else "", v.level.text)
    print_table(t)
