"""`ptxbench problems list|show`."""

from __future__ import annotations

import json

import typer
from rich.console import Console
from rich.table import Table

from .errors import one_line_errors

app = typer.Typer(help="The problem catalog (FlashInfer-Trace definitions + our extensions).", no_args_is_help=True)


@app.command("list")
@one_line_errors
def list_problems(as_json: bool = typer.Option(False, "--json", help="Print JSON instead of a table.")) -> None:
    """List every problem with its baseline library and primary workload."""
    from ptxcore.problems import load_catalog

    catalog = load_catalog()
    rows = [
        {
            "name": p.name, "op_type": p.definition.op_type, "primary": p.extension.primary,
            "baseline": p.extension.baseline.library.value, "workload": p.primary_workload.axes,
        }
        for p in catalog.values()
    ]
    if as_json:
        typer.echo(json.dumps(rows, indent=1))
        return
    table = Table(title=f"{len(rows)} problems")
    for col in ("name", "op_type", "primary", "baseline", "workload axes"):
        table.add_column(col)
    for r in rows:
        axes = ", ".join(f"{k}={v}" for k, v in r["workload"].items())
        table.add_row(r["name"], r["op_type"], "yes" if r["primary"] else "", r["baseline"], axes)
    Console().print(table)


@app.command("show")
@one_line_errors
def show(name: str = typer.Argument(..., help="Definition name, e.g. gemm_n7168_k5120.")) -> None:
    """Print a problem's definition, workloads and extension as JSON."""
    from ptxcore.problems import get_problem

    p = get_problem(name)
    payload = {
        "definition": p.definition.model_dump(mode="json"),
        "workloads": [w.model_dump(mode="json") for w in p.workloads],
        "extension": p.extension.model_dump(mode="json"),
    }
    typer.echo(json.dumps(payload, indent=1))
