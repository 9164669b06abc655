"""`ptxbench problems list|show [--json]`."""

from __future__ import annotations

from typing import TYPE_CHECKING

import typer

from .errors import one_line_errors
from .output import add_row, console_for, echo_json, print_table, table

if TYPE_CHECKING:
    from ptxcore.problems import Problem, ProblemWork

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
        echo_json(rows)
        return
    t = table(f"{len(rows)} problems", ("name", "op_type", "primary", "baseline", "workload axes"))
    for r in rows:
        axes = ", ".join(f"{k}={v}" for k, v in r["workload"].items())
        add_row(t, r["name"], r["op_type"], "yes" if r["primary"] else "", r["baseline"], axes)
    print_table(t)


@app.command("show")
@one_line_errors
def show(
    name: str = typer.Argument(..., help="Definition name, e.g. gemm_n7168_k5120."),
    as_json: bool = typer.Option(False, "--json", help="Print the definition, workloads and extension as JSON."),
) -> None:
    """Show a problem: its tensors, axes, workloads, baseline, tolerance and target instructions."""
    from ptxcore.problems import get_problem, problem_work

    p = get_problem(name)
    work = problem_work(p)
    if as_json:
        echo_json({
            "definition": p.definition.model_dump(mode="json"),
            "workloads": [w.model_dump(mode="json") for w in p.workloads],
            "extension": p.extension.model_dump(mode="json"),
            "work": work.model_dump(mode="json"),
        })
        return
    _show_human(p, work)


def _show_human(p: Problem, work: ProblemWork) -> None:
    d, ext = p.definition, p.extension
    tol = ext.tolerance
    lines = [f"{d.name} ({d.op_type}{', primary' if ext.primary else ''})", d.description or "",
             f"baseline: {ext.baseline.library.value} ({ext.baseline.description or ext.baseline.implementation})",
             f"tolerance: {tol.rule} atol={tol.atol:g} rtol={tol.rtol:g} matched ratio={tol.matched_ratio:g}",
             "target instructions: " + "; ".join(f"{a}: {', '.join(f)}" for a, f in ext.targets.items()),
             f"seed: {ext.seed}; workloads: {len(p.workloads)} (primary: "
             + ", ".join(f"{k}={v}" for k, v in p.primary_workload.axes.items()) + ")",
             f"work (primary workload): {work.flops:,} FLOPs = {work.flops_expression}; minimum {work.min_bytes:,} bytes "
             f"({work.min_bytes_rule.value})"]
    console = console_for(None)
    for line in lines:
        if line:
            console.print(line, markup=False, highlight=False)
    axes = table("axes", ("axis", "kind", "value", "description"))
    for axis, spec in d.axes.items():
        add_row(axes, axis, spec.type, getattr(spec, "value", None) if spec.type == "const" else "",
                spec.description or "")
    print_table(axes)
    tensors = table("tensors", ("name", "role", "shape", "dtype", "description"))
    for role, group in (("input", d.inputs), ("output", d.outputs)):
        for tensor, spec in group.items():
            shape = "scalar" if spec.shape is None else "[" + ", ".join(spec.shape) + "]"
            add_row(tensors, tensor, role, shape, getattr(spec.dtype, "value", spec.dtype), spec.description or "")
    print_table(tensors)
    if d.constraints:
        console.print("constraints: " + "; ".join(d.constraints), markup=False, highlight=False)
