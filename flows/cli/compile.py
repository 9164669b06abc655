"""`ptxbench compile KERNEL.cu|kernel.py --problem NAME --arch hopper|blackwell [--language cuda|triton] [--json]`:
the CPU stage of one candidate (a `.py` file is a Triton candidate unless --language says otherwise, as in eval)."""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING

import typer

from .errors import kernel_language, one_line_errors, read_text_file
from .output import console_for

if TYPE_CHECKING:
    from ptxcore.compile import CompiledCandidate

_DYNAMIC_SMEM = re.compile(r"\bextern\b[^;{}]*\b__shared__\b")
"""`extern __shared__ ... smem[];`: shared memory sized at launch, which ptxas (static sizes only) cannot report."""


def compile_payload(compiled: CompiledCandidate, source: str = "") -> dict:
    """The JSON envelope of the compile command (`dynamic_smem`: the source declares launch-sized shared memory)."""
    r = compiled.result
    payload = {
        "dynamic_smem": bool(_DYNAMIC_SMEM.search(source)),
        "status": r.status.value,
        "reason": r.reason,
        "log": r.log,
        "resources": r.resources.model_dump(mode="json"),
        "cache_hit": r.cache_hit,
        "source_sha256": r.source_sha256,
        "cubin_sha256": r.cubin_sha256,
        "toolkit": r.toolkit_version,
        "flags": r.flags,
        "sass": None,
    }
    if compiled.sass is not None:
        s = compiled.sass
        payload["sass"] = {
            "counts": s.counts,
            "family_counts": s.family_counts,
            "required_families": s.required_families,
            "excluded": s.excluded,
            "target_static": s.target_static.value,
        }
    return payload


@one_line_errors
def compile_command(
    kernel: str = typer.Argument(..., help="Path of the candidate .cu (CUDA) or .py (Triton) file."),
    problem: str = typer.Option(..., "--problem", "-p", help="Definition name."),
    arch: str = typer.Option("hopper", "--arch", "-a", help="hopper | blackwell (or h100, h200, b200)."),
    language: str = typer.Option(None, "--language", "-l", help="cuda | triton (default: .py files are triton)."),
    as_json: bool = typer.Option(False, "--json", help="Print the JSON envelope."),
) -> None:
    """Run a candidate's CPU stage on this machine (CUDA: nvcc and the static SASS verdict; Triton: the validator)."""
    from ptxcore.arch import get_architecture
    from ptxcore.compile import BuildOptions, build_candidate
    from ptxcore.problems import get_problem

    source = read_text_file(kernel)
    lang = kernel_language(language, kernel)
    get_problem(problem)
    architecture = get_architecture(arch)
    compiled = build_candidate(source, BuildOptions(arch=architecture), language=lang)
    payload = compile_payload(compiled, source)
    if as_json:
        typer.echo(json.dumps(payload, indent=1))
    else:
        _print_human(payload, architecture.key)
    if payload["status"] != "COMPILED":
        raise typer.Exit(1)


def _print_human(p: dict, arch: str) -> None:
    from rich.markup import escape

    console = console_for()  # piped: one line per fact, never an identifier cut at 80 columns
    color = {"COMPILED": "green", "COMPILE_ERROR": "red", "REJECTED": "yellow"}[p["status"]]
    reason = " — " + escape(p["reason"]) if p["reason"] else ""  # a Triton rule is named in [brackets]
    console.print(f"[bold {color}]{p['status']}[/] ({arch}){reason}")
    if p["status"] == "COMPILE_ERROR":
        console.print(p["log"], markup=False, highlight=False)
    dynamic = " + dynamic (sized at launch)" if p["dynamic_smem"] else ""
    for k in p["resources"]["kernels"]:
        console.print(
            f"  {k['function']}: {k['registers']} regs, {k['shared_bytes']} B static smem{dynamic}, "
            f"{k['spill_store_bytes']}+{k['spill_load_bytes']} B spills", markup=False, highlight=False
        )
    for w in p["resources"]["performance_warnings"]:
        console.print(f"  [yellow]ptxas:[/] {w}")
    if p["sass"]:
        fam = ", ".join(f"{k}={v}" for k, v in p["sass"]["family_counts"].items()) or "none"
        console.print(f"  target families ({'/'.join(p['sass']['required_families'])}): "
                      f"[bold]{p['sass']['target_static']}[/] — counted: {fam}")
        if p["sass"]["excluded"]:
            console.print(f"  excluded: {len(p['sass']['excluded'])} (e.g. {p['sass']['excluded'][0]})", markup=False)
    if p["cache_hit"]:
        console.print("  (served from the compile cache)")
