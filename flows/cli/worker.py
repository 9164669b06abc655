"""`ptxbench worker --arch hopper [--profiler URL] [--limit N]`: a Prefect task worker on a GPU host.

Many hosts (docs/architecture.md, "Scale-out"): each GPU host runs `ptxbench profiler serve` for its own GPUs and
this worker, which takes the campaign's `judge-on-<arch>` task runs from the Prefect server at
PREFECT_API_URL and judges them through the host's service (or, without --profiler, its own GPU). The
campaign routes an architecture here with `--profiler ARCH=prefect` (`profilers: {ARCH: prefect}`).
"""

from __future__ import annotations

import os

import typer

from .errors import UserError, one_line_errors


@one_line_errors
def worker_command(
    arch: str = typer.Option(..., "--arch", help="Architecture whose judge tasks this worker serves (hopper, blackwell)."),
    profiler: str = typer.Option(None, "--profiler",
                                 help="This host's profiling service URL (default: judge on this host's GPU); "
                                      "also local, none or recorded:PATH."),
    limit: int = typer.Option(None, "--limit", min=1,
                              help="Judge tasks run at once (default: one per GPU of the service, else 1)."),
    judge_plugin: str = typer.Option(None, "--judge-plugin", hidden=True, help="module:factory judge backend."),
) -> None:
    """Serve this host's judge tasks for one architecture until interrupted."""
    from ptxcore.arch import get_architecture
    from ptxcore.judge.route import WORKER_JUDGE_ENV, RouteError, RouteKind, plugin_route, worker_route
    from tasks.remote_judge import worker_backend, worker_task

    try:
        task = worker_task(arch)
    except ValueError as exc:
        raise UserError(f"--arch {arch!r}: {exc}") from exc
    if not os.environ.get("PREFECT_API_URL"):
        raise UserError("PREFECT_API_URL is not set: point it at the campaign's Prefect server "
                        "(`prefect server start`); a worker on a temporary server would receive nothing")
    try:  # which routes a worker may take is worker_route's decision, not this command's
        os.environ[WORKER_JUDGE_ENV] = profiler or (str(plugin_route(judge_plugin)) if judge_plugin else "")
        route = worker_route()
        backend = worker_backend(get_architecture(arch).key)
    except RouteError as exc:
        raise UserError(str(exc)) from exc
    slots = limit or _service_slots(route.target if route.kind is RouteKind.SERVICE else None) or 1
    typer.echo(f"worker: serving {task.name} (up to {slots} at once) with {backend.name}; "
               f"Prefect API {os.environ['PREFECT_API_URL']}", err=True)
    from prefect.task_worker import serve

    from flows.logs import bridge_run_logs

    bridge_run_logs()  # the judge's log lines go to the task run they belong to
    serve(task, limit=slots)


def _service_slots(url: str | None) -> int | None:
    """One slot per GPU the profiling service reports (None when there is no service or no answer)."""
    if not url:
        return None
    from ptxcore.gpu.service.client import ProfilerClient

    try:
        with ProfilerClient(url, timeout_s=30, retries=0) as client:
            return len(client.health().get("gpus", [])) or None
    except Exception as exc:  # noqa: BLE001 - the worker still serves; the slot count falls back to 1
        typer.echo(f"worker: could not read {url}/health ({exc}); serving one task at a time", err=True)
        return None
