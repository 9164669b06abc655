"""`ptxbench adapt build | validate | status`: SFT data builds from the command line (recipes in campaigns/adapt/).

`build` runs the adapt-build flow in this process (Prefect's temporary local server unless PREFECT_API_URL
is set), with a progress bar per step; rerunning the same build id resumes it.
"""

from __future__ import annotations

import json
from pathlib import Path

import typer
from rich.console import Console

from .campaign import ALLOW_ENDPOINT, _quiet_prefect, allow_endpoints, parse_profilers
from .errors import UserError, one_line_errors

app = typer.Typer(help="Build Fixit / KernelGen SFT data from campaign failures (training runs elsewhere).",
                  no_args_is_help=True)


def _errors() -> tuple[type[BaseException], ...]:
    from flows.limits import ConcurrencyLimitError
    from ptxcore.adapt import AdaptError
    from ptxcore.agent import CampaignConfigError
    from ptxcore.agent.replay import ReplayError
    from ptxcore.warehouse import WarehouseError

    return (AdaptError, CampaignConfigError, ReplayError, WarehouseError, ConcurrencyLimitError)


def _precheck(ctx, steps: list[str]) -> None:
    """Fail fast, before Prefect starts: the warehouse and the source campaigns must be there."""
    from ptxcore.adapt.stages import source_turns
    from ptxcore.warehouse import Warehouse

    if not Path(ctx.warehouse).is_file():
        raise UserError(f"no warehouse at {ctx.warehouse} (run the source campaigns first, or pass --warehouse)")
    if "select" in steps:
        with Warehouse(ctx.warehouse, read_only=True) as wh:
            known = {c.campaign_id for c in wh.campaigns()}
            missing = [c for c in ctx.recipe.selection.source_campaigns if c not in known]
            if missing:
                source_turns(wh, missing[:1])  # raises the one-line "unknown campaign" error


@app.command("build")
@one_line_errors
def build_command(
    recipe: str = typer.Argument(..., help="Recipe file (campaigns/adapt/*.yaml)."),
    steps: str = typer.Option(None, "--steps", help="Comma-separated steps (select,repair,pairs,notes,reason,export); default all."),
    warehouse: str = typer.Option(None, "--warehouse", "--db", help="DuckDB file with the source campaigns (default: "
                                  "the recipe's, else runs/<first source campaign>/warehouse.duckdb)."),
    build_id: str = typer.Option(None, "--build-id", help="Build id (default: the recipe name); rerun to resume."),
    out: str = typer.Option(None, "--out", help="Export folder (default: <warehouse folder>/adapt/<build id>)."),
    profiler: list[str] = typer.Option(None, "--profiler", help="Judge for the repairs: URL, 'prefect' or arch=URL."),
    mlflow_uri: str = typer.Option(None, "--mlflow-uri", help="MLflow tracking URI for the repair campaign."),
    judge_plugin: str = typer.Option(None, "--judge-plugin", hidden=True, help="module:factory judge backend."),
    as_json: bool = typer.Option(False, "--json", help="Print the summary as JSON."),
    verbose: bool = typer.Option(False, "--verbose", "-v", help="Show Prefect's task-run logs."),
    allow_endpoint: list[str] = ALLOW_ENDPOINT,
) -> None:
    """Run (or resume) an SFT data build and print what each step did."""
    allow_endpoints(allow_endpoint)
    _quiet_prefect(verbose)
    from flows.adapt import build_context, resolve_steps

    wanted = [s.strip() for s in steps.split(",") if s.strip()] if steps else None
    try:
        ctx = build_context(recipe, warehouse, build_id)
        todo = resolve_steps(ctx, wanted)
        profilers = parse_profilers(profiler) or None
        _precheck(ctx, todo)
    except _errors() as exc:
        raise UserError(str(exc)) from exc
    summary = _run_with_progress(recipe_path=recipe, steps=todo, warehouse=ctx.warehouse, build_id=ctx.build_id,
                                 out_dir=out, profilers=profilers, mlflow_tracking_uri=mlflow_uri,
                                 judge_plugin=judge_plugin)
    if as_json:
        typer.echo(json.dumps(summary.model_dump(mode="json"), indent=1))
    else:
        _print_summary(summary)
    if summary.stopped:
        raise UserError(summary.stopped)


def _run_with_progress(**params):
    import logging

    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from flows.adapt import ADAPT_LISTENERS, adapt_build_flow
    from flows.campaign import PROGRESS_LISTENERS

    logging.getLogger("mlflow").setLevel(logging.WARNING)
    columns = (TextColumn("[bold]{task.fields[step]:<12}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
               TextColumn("{task.description}"))
    with Progress(*columns, console=Console(stderr=True), transient=False) as bar:
        tasks: dict[str, int] = {}

        def on_step(step: str, done: int, total: int, last: str) -> None:
            if step not in tasks:
                tasks[step] = bar.add_task(last, total=None, step=step)
            bar.update(tasks[step], completed=done, total=total or None, description=last[-70:])

        def on_turn(done: int, planned: int, last: str) -> None:
            on_step("repair", done, planned, f"turns: {last}")

        ADAPT_LISTENERS.append(on_step)
        PROGRESS_LISTENERS.append(on_turn)
        try:
            return adapt_build_flow(**params)
        except _errors() as exc:
            raise UserError(str(exc)) from exc
        finally:
            ADAPT_LISTENERS.remove(on_step)
            PROGRESS_LISTENERS.remove(on_turn)


def _counts(d: dict[str, int]) -> str:
    return ", ".join(f"{k} {v}" for k, v in sorted(d.items())) or "none"


def _print_summary(s) -> None:
    out = Console(highlight=False, soft_wrap=True)
    out.print(f"build {s.build_id} (warehouse {s.warehouse}): {', '.join(s.steps)}", markup=False)
    if s.selection:
        out.print(f"select: {s.selection.selected} of {s.selection.turns_seen} source turns selected "
                  f"({_counts(s.selection.outcomes)})", markup=False)
        for p in s.selection.by_problem:
            out.print(f"  {p.problem}: {p.kept} of {p.available}{' (underfilled)' if p.underfilled else ''}", markup=False)
    if s.repair:
        out.print(f"repair: campaign {s.repair.campaign_id}: {s.repair.trajectories_planned} trajectories, "
                  f"{s.repair.turns_recorded} turns ({s.repair.turns_this_run} in this run), judges "
                  f"{_counts(s.repair.judges)}", markup=False)
        for err in s.repair.errors:
            out.print(f"  error {err}", markup=False)
    if s.pairs:
        out.print(f"pairs: {s.pairs.pairs} kept from {s.pairs.repairs} sources ({s.pairs.repairs_fixed} with a pair); "
                  f"candidates {_counts(s.pairs.statuses)}; repair turns {_counts(s.pairs.repair_turn_statuses)}",
                  markup=False)
    if s.notes:
        n = s.notes
        out.print(f"notes: collection {n.collection_id}: {n.records} records from {n.pairs} pairs ({n.distilled} "
                  f"distilled this run, {len(n.refused)} refused){' -> ' + n.jsonl if n.jsonl else ''}", markup=False)
    if s.reason:
        out.print(f"reason: {s.reason.calls} synthesizer calls this run ({_counts(s.reason.statuses)}); "
                  f"{s.reason.accepted_pairs} of {s.reason.pairs} pairs have an accepted monologue", markup=False)
    if s.export:
        e = s.export
        counted = f"{e.tokenizer}{' (fallback estimate)' if e.tokenizer_fallback else ''}"
        out.print(f"export: {e.rows} rows -> {e.parquet} (sha256 {e.parquet_sha256})\n"
                  f"  prompt-completion (TRL) {e.prompt_completion}\n  manifest {e.manifest}\n"
                  f"  dropped: {_counts(e.dropped)}; counted by {counted}{'; ' + e.tokenizer_note if e.tokenizer_note else ''}",
                  markup=False)


@app.command("validate")
@one_line_errors
def validate_command(recipe: str = typer.Argument(..., help="Recipe file.")) -> None:
    """Check a recipe and show what it would build (no model calls, no warehouse)."""
    from ptxcore.adapt import load_recipe
    from ptxcore.adapt.spec import resolve_variants

    try:
        r, _ = load_recipe(recipe)
        variants = resolve_variants(r.selection)
    except _errors() as exc:
        raise UserError(str(exc)) from exc
    sel = r.selection
    typer.echo(f"{recipe}: {r.name} ({r.config_label or 'no label'}): {r.template.value}, steps {', '.join(r.steps())}")
    if r.reproduces:
        typer.echo(f"  reproduces {r.reproduces}")
    for rule in r.our_inference:
        typer.echo(f"  our inference: {rule}")
    typer.echo(f"  sources {', '.join(sel.source_campaigns)}; problems {', '.join(sel.problem_names())}")
    typer.echo(f"  turns {sel.source_turns[0]}-{sel.source_turns[1]}; variants {_variants_text(variants)}")
    cap = f"cap {sel.per_problem_cap} per problem ({sel.balance.value}-balanced)" if sel.per_problem_cap else "no cap"
    typer.echo(f"  {cap}, strata {', '.join(sel.strata)}, seed {sel.seed}")
    if r.teacher:
        typer.echo(f"  teacher {r.teacher.model.model}: {r.teacher.turns} turns, stop at speedup {r.teacher.target_speedup}")
    typer.echo(f"  synthesizer {r.synthesizer.model.model}; budget {r.export.max_tokens} tokens ({r.export.tokenizer})")


def _variants_text(variants) -> str:
    from ptxcore.adapt.spec import DirectionVariants

    if isinstance(variants, DirectionVariants):
        return f"forward problems {', '.join(variants.forward)}; backward problems {', '.join(variants.backward)}"
    return ", ".join(variants) if variants else "all"


@app.command("status")
@one_line_errors
def status_command(
    target: str = typer.Argument(..., help="The recipe file (its build id and warehouse are the defaults, as for "
                                 "`adapt build`) or a build id (then --warehouse names its file)."),
    warehouse: str = typer.Option(None, "--warehouse", "--db", help="DuckDB file (default: the recipe's, as for "
                                  "`adapt build`; --db is the same option)."),
    build_id: str = typer.Option(None, "--build-id", help="Build id, when it is not the recipe's name."),
) -> None:
    """Rows per stage of a build, from its warehouse (read-only)."""
    from flows.adapt import build_context
    from ptxcore.adapt.store import AdaptStore
    from ptxcore.warehouse import Warehouse

    if Path(target).is_file():
        try:
            ctx = build_context(target, warehouse, build_id)
        except _errors() as exc:
            raise UserError(str(exc)) from exc
        build_id, warehouse = ctx.build_id, ctx.warehouse
    elif warehouse is None:
        raise UserError(f"{target!r} is not a recipe file: give the recipe (its warehouse is the default) or "
                        "--warehouse FILE with a build id")
    else:
        build_id = build_id or target
    if not Path(warehouse).is_file():
        raise UserError(f"no warehouse at {warehouse}")
    try:
        with Warehouse(warehouse, read_only=True) as wh:
            store = AdaptStore(wh, build_id)
            if store.build() is None:
                raise UserError(f"no build {build_id!r} in {warehouse}")
            counts = {"selected": sum(r.outcome.value == "selected" for r in store.selections()),
                      "repairs": len(store.repairs()), "pairs kept": len(store.pairs(kept_only=True)),
                      "reasoning calls": len(store.reasoning()), "rows": len(store.rows()), "exports": len(store.exports())}
    except _errors() as exc:
        raise UserError(str(exc)) from exc
    typer.echo(f"build {build_id}: " + ", ".join(f"{k} {v}" for k, v in counts.items()))
