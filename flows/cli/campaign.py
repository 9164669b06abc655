"""`ptxbench campaign run | validate | status | deploy`: campaigns from the command line.

`run` executes the campaign flow in this process (Prefect's temporary local server unless
PREFECT_API_URL points at a long-lived `prefect server start`), draws a progress bar, and ends with
the headline table. Heavy imports happen inside the commands.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import typer
from rich.console import Console

from flows.offline import MLFLOW_UI_ENV

from .errors import UserError, fail, one_line_errors
from .output import console_for

app = typer.Typer(help="Run, inspect and schedule benchmark campaigns.", no_args_is_help=True)
DEFAULT_CONFIG = "campaigns/demo.yaml"


def _config_errors() -> tuple[type[BaseException], ...]:
    from ptxcore.agent import CampaignConfigError
    from ptxcore.agent.replay import ReplayError

    return (CampaignConfigError, ReplayError)


def _run_errors() -> tuple[type[BaseException], ...]:
    """Errors of a campaign run that are the user's to fix (one line, no traceback)."""
    from flows.limits import ConcurrencyLimitError
    from flows.runtime import TemporaryServerError
    from ptxcore.warehouse import WarehouseError

    return _config_errors() + (WarehouseError, ConcurrencyLimitError, TemporaryServerError)


ALLOW_ENDPOINT = typer.Option(
    None, "--allow-endpoint", "--allow-api-base", metavar="URL",
    help="Let the file send requests (and the key it names) to this address: a model's api_base, a profiler URL "
         "or an MLflow server (repeatable; also $PTXBENCH_ALLOWED_ENDPOINTS). A campaign file alone cannot.")
"""`--allow-endpoint URL`: the user's consent, outside the file, to an address the file names."""


def allow_endpoints(urls: list[str] | None) -> None:
    """Add `--allow-endpoint` URLs to this process's allowed addresses (one line on a malformed URL)."""
    from ptxcore.agent.endpoints import EndpointError, allow_for_this_process

    try:
        allow_for_this_process(urls or [])
    except EndpointError as exc:
        raise UserError(str(exc)) from exc


def parse_profilers(values: list[str] | None) -> dict[str, str]:
    """`--profiler ROUTE` (every architecture) or `--profiler ARCH=ROUTE`, repeatable (routes: ptxcore.judge.route;
    `prefect` hands the judgements to Prefect task workers, `ptxbench worker --arch ARCH` on the GPU hosts)."""
    from ptxcore.arch import UnknownArchitectureError
    from ptxcore.judge.route import RouteError, parse_cli_routes

    try:
        return {arch: str(route) for arch, route in parse_cli_routes(values).items()}
    except (UnknownArchitectureError, RouteError) as exc:  # each names the bad value and the spellings
        raise UserError(f"--profiler: {exc}") from exc


def _quiet_prefect(verbose: bool) -> None:
    if not verbose:
        os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")
        os.environ.setdefault("PREFECT_SERVER_LOGGING_LEVEL", "WARNING")
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    # A judge task refused a gpu:<arch> slot retries after min(mean occupancy, this cap); Prefect's cap of
    # 10 s leaves a freed GPU idle for seconds per hand-over (benchmarks/campaign_slot_wait.py). Applies to
    # the temporary server this process starts; set it on a long-lived server too.
    os.environ.setdefault("PREFECT_SERVER_TASKS_TAG_CONCURRENCY_SLOT_WAIT_SECONDS", "1")


@app.command("run")
@one_line_errors
def run_command(
    config: str = typer.Argument(DEFAULT_CONFIG, help="Campaign file (YAML)."),
    campaign_id: str = typer.Option(None, "--campaign-id", help="Override the id (rerun an id to resume it)."),
    warehouse: str = typer.Option(None, "--warehouse", "--db",
                                  help="DuckDB file (default runs/<id>/warehouse.duckdb); --db is the same option."),
    profiler: list[str] = typer.Option(None, "--profiler", help="Judge route: a profiling service URL, 'prefect' (task workers), local, none or recorded:PATH; "
                                 "arch=ROUTE for one architecture (repeatable)."),
    mlflow_uri: str = typer.Option(None, "--mlflow-uri", help="MLflow tracking URI (default sqlite in ./mlruns)."),
    turns: int = typer.Option(None, "--turns", min=1, max=8, help="Override the turn budget (quick runs)."),
    judge_plugin: str = typer.Option(None, "--judge-plugin", hidden=True, help="module:factory judge backend."),
    as_json: bool = typer.Option(False, "--json", help="Print the summary as JSON."),
    verbose: bool = typer.Option(False, "--verbose", "-v", help="Show Prefect's task-run logs."),
    allow_endpoint: list[str] = ALLOW_ENDPOINT,
) -> None:
    """Run (or resume) a campaign and print its headline table."""
    allow_endpoints(allow_endpoint)
    _quiet_prefect(verbose)
    cfg, profilers = _checked_run_config(config, campaign_id, warehouse, profiler, mlflow_uri, turns)
    summary = _run_with_progress(cfg, config_path=config, campaign_id=campaign_id, warehouse=warehouse,
                                 profilers=profilers, mlflow_tracking_uri=mlflow_uri, judge_plugin=judge_plugin,
                                 turns=turns)
    if as_json:
        typer.echo(json.dumps(summary.model_dump(mode="json"), indent=1))
    else:
        _print_summary(summary)
    if summary.errors:
        raise typer.Exit(1)


def _checked_run_config(config: str, campaign_id: str | None, warehouse: str | None, profiler: list[str] | None,
                        mlflow_uri: str | None, turns: int | None):
    """The campaign file with overrides, checked before anything is started or written (one line on error)."""
    from ptxcore.agent import check_campaign_id, load_campaign
    from ptxcore.agent.plan import grid_size

    try:
        cfg, _ = load_campaign(config)
        if campaign_id is not None:
            check_campaign_id(campaign_id)
        grid_size(cfg)  # arithmetic, before the slow imports below
        profilers = parse_profilers(profiler) or None
        from flows.campaign import resolve_config, warehouse_path
        from flows.preflight import preflight_run

        cfg, text = resolve_config(config, campaign_id, warehouse, mlflow_uri, turns)
        report = preflight_run(cfg, warehouse_path(cfg), where=config, text=text)
    except _config_errors() as exc:
        raise UserError(str(exc)) from exc
    for warning in report.warnings:
        typer.echo(f"warning: {warning}", err=True)
    return cfg, profilers


def _run_with_progress(cfg, **params):
    import logging

    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from flows.campaign import PROGRESS_LISTENERS, campaign_flow
    from flows.runtime import arm_exit_watchdog, start_temporary_prefect_server

    logging.getLogger("mlflow").setLevel(logging.WARNING)
    console = Console(stderr=True)
    columns = (TextColumn("[bold]{task.fields[name]}"), BarColumn(), MofNCompleteColumn(),
               TextColumn("turns"), TimeElapsedColumn(), TextColumn("{task.description}"))
    with Progress(*columns, console=console, transient=False) as bar:
        task = bar.add_task("starting (Prefect server, MLflow store)", total=None, name=params["campaign_id"] or cfg.id)

        def listener(done: int, planned: int, last: str) -> None:
            bar.update(task, completed=done, total=planned, description=last)

        PROGRESS_LISTENERS.append(listener)
        try:
            arm_exit_watchdog()  # a signalled campaign ends within seconds, whatever Prefect's handlers do
            start_temporary_prefect_server()  # here, in the main thread: it dies with this process
            summary = campaign_flow(**params)
        except _run_errors() as exc:
            raise UserError(str(exc)) from exc
        finally:
            PROGRESS_LISTENERS.remove(listener)
    return summary


def print_headline(title: str, rows, judges: dict[str, str] | None = None) -> None:
    """The headline table (`campaign run` and `campaign status` alike) and its notes."""
    from ptxcore.agent.summary import SHORT_HEADER, headline_cells, headline_notes

    from .output import add_row, print_table, table

    t = table(title, SHORT_HEADER, right=SHORT_HEADER[2:], ids=SHORT_HEADER[:2])
    for row in rows:
        add_row(t, *headline_cells(row, compact=True))
    print_table(t)
    console = console_for()
    for note in headline_notes(rows):
        console.print(note, style="yellow" if "NOT_EVALUATED" in note else None, markup=False, highlight=False)
    if judges and any(r.not_evaluated for r in rows):
        console.print(f"judges: {', '.join(f'{a}: {j}' for a, j in judges.items())}. Run on a GPU host or pass "
                      "--profiler URL to judge them.", markup=False, highlight=False)


def _mlflow_ui_hint(summary) -> str:
    uri, path = summary.mlflow_tracking_uri, summary.mlflow_ui_path
    if uri.startswith(("http://", "https://")):
        return f"runs at {uri.rstrip('/')}/{path}"
    return f"`{MLFLOW_UI_ENV} mlflow ui --backend-store-uri {uri}`, then open /{path}"


def _print_summary(summary) -> None:
    print_headline(f"Campaign {summary.campaign_id}: headline", summary.headline, summary.judges)
    console = console_for()
    console.print(f"turns recorded: {summary.turns_recorded} ({summary.turns_this_run} in this run) of at most "
                  f"{summary.turns_planned_max}; trajectories: {summary.trajectories_planned}", highlight=False)
    console.print(f"warehouse: {summary.warehouse}\nMLflow: {summary.mlflow_tracking_uri} "
                  f"(experiment {summary.mlflow_experiment}; {_mlflow_ui_hint(summary)})", highlight=False, markup=False)
    for err in summary.errors:
        console.print(f"[red]error[/] {err}", highlight=False)
    if summary.errors:
        console.print("Rerun the same command to resume the unfinished trajectories.")


@app.command("validate")
@one_line_errors
def validate_command(
    config: str = typer.Argument(DEFAULT_CONFIG, help="Campaign file (YAML)."),
    as_json: bool = typer.Option(False, "--json", help="Print the planned trajectories as JSON."),
    allow_endpoint: list[str] = ALLOW_ENDPOINT,
) -> None:
    """Check a campaign file and show what it would run (no model calls).

    Checks: keys and values (line numbers), the grid size (arithmetic, bounded), replay libraries, litellm
    providers, API key variables (the provider's own only). An API key variable that is not set here, or an
    address the file names that is not allowed (--allow-endpoint), is a warning: `campaign run` refuses to start
    without it. Warnings go to stderr and leave the exit code 0.
    """
    from flows.retrieval import file_notes
    from ptxcore.agent import load_campaign, plan_campaign
    from ptxcore.agent.preflight import preflight

    from .output import echo_json

    allow_endpoints(allow_endpoint)
    try:
        cfg, text = load_campaign(config)
        report = preflight(cfg, keys_required=False, where=config, text=text)
        file_notes(cfg, config)  # a repair_retrieval notes file is checked too (path, JSON, records)
    except _config_errors() as exc:
        raise UserError(str(exc)) from exc
    if as_json:
        plans = plan_campaign(cfg)
        return echo_json({"campaign_id": cfg.id, "turns": cfg.turns, "trajectories": [
            {"trajectory_id": p.trajectory_id, "model": p.model.model, "arch": p.arch, "prompt_variant": p.prompt_variant,
             "problem": p.problem, "index": p.index} for p in plans]})
    g = report.grid
    typer.echo(f"{config}: campaign {cfg.id}: {g.models} models x {g.arch_variant_pairs} (architecture, variant) "
               f"pairs x {g.trajectories_per_cell} trajectories x {g.problems} problems "
               f"= {g.trajectories} trajectories, at most {g.max_turns} turns")
    for arch in cfg.architectures:
        typer.echo(f"  {arch}: {', '.join(report.variants[arch])}")
    for warning in report.warnings:
        typer.echo(f"warning: {warning}", err=True)


@app.command("status")
@one_line_errors
def status_command(
    campaign_id: str = typer.Argument(..., help="Campaign id."),
    warehouse: str = typer.Option(None, "--warehouse", "--db",
                                  help="DuckDB file (default runs/<id>/warehouse.duckdb); --db is the same option."),
    as_json: bool = typer.Option(False, "--json", help="Print the headline rows and stop reasons as JSON."),
) -> None:
    """Headline table and stop reasons of a campaign, from its warehouse (read-only)."""
    from collections import Counter

    from ptxcore.agent import CampaignConfigError, check_campaign_id, headline_rows
    from ptxcore.warehouse import Warehouse, WarehouseError

    from .output import echo_json

    try:
        check_campaign_id(campaign_id, "campaign id")
    except CampaignConfigError as exc:
        raise UserError(str(exc)) from exc
    path = Path(warehouse or f"runs/{campaign_id}/warehouse.duckdb")
    if not path.is_file():
        fail(f"no warehouse at {path}")
    try:
        with Warehouse(path, read_only=True) as wh:
            invalid = wh.invalid_turns(campaign_id)  # left out, as in the metric views
            turns = [t for t in wh.turns(campaign_id) if t.key not in invalid]
            trajectories = wh.trajectories(campaign_id)
    except WarehouseError as exc:
        raise UserError(str(exc)) from exc
    if not trajectories:
        fail(f"no campaign {campaign_id!r} in {path}")
    rows = headline_rows(turns, trajectories)
    stops = dict(sorted(Counter(t.stop_reason.value for t in trajectories).items()))
    if as_json:
        echo_json({"campaign_id": campaign_id, "warehouse": str(path.resolve()), "turns_recorded": len(turns),
                   "trajectories": len(trajectories), "stop_reasons": stops,
                   "headline": [r.model_dump(mode="json") for r in rows]})
        return
    print_headline(f"Campaign {campaign_id}: headline", rows)
    console_for().print(f"turns recorded: {len(turns)}; trajectories: {len(trajectories)} ("
                              + ", ".join(f"{k}: {v}" for k, v in stops.items()) + f")\nwarehouse: {path}",
                              markup=False, highlight=False)


@app.command("deploy")
@one_line_errors
def deploy_command(
    config: str = typer.Argument(DEFAULT_CONFIG, help="Campaign file (YAML)."),
    name: str = typer.Option(None, "--name", help="Deployment name (default: the campaign id)."),
    cron: str = typer.Option("0 3 * * *", "--cron", help="Cron schedule (server time zone: UTC unless set)."),
    pool: str = typer.Option("ptxbench-process", "--pool", help="Process work pool (created when missing)."),
) -> None:
    """Schedule a campaign: a deployment with a cron schedule on a process work pool (needs a Prefect server)."""
    _quiet_prefect(False)
    from flows.deploy import DeployError, deploy_campaign

    try:
        result = deploy_campaign(config, name=name, cron=cron, pool=pool)
    except _config_errors() + (DeployError,) as exc:
        raise UserError(str(exc)) from exc
    typer.echo(f"deployment {result.flow_name}/{result.name} (id {result.deployment_id}) on pool {result.pool}, "
               f"cron {result.cron!r}")
    typer.echo(f"start a worker: prefect worker start --pool {result.pool}")
