"""`ptxbench profiler serve --gpus 0,1 [--host 127.0.0.1] [--port N]`: the profiling service.
`ptxbench profiler health --server URL`: its /health as a table."""

from __future__ import annotations

import json

import typer

from .errors import UserError, one_line_errors

app = typer.Typer(help="The GPU profiling service (one persistent judge worker per GPU).", no_args_is_help=True)


@app.command("serve")
@one_line_errors
def serve_command(
    gpus: str = typer.Option(..., "--gpus", help="GPU indices, comma-separated, e.g. 0,1."),
    host: str = typer.Option("127.0.0.1", "--host", help="Bind address; non-loopback requires a token."),
    port: int = typer.Option(8765, "--port", help="TCP port (0: any free port)."),
    work_dir: str = typer.Option(".ptxbench/profiler", "--work-dir", help="The only directory it writes."),
    token_file: str = typer.Option(None, "--token-file",
                                   help="File holding the shared token (else $PTXBENCH_PROFILER_TOKEN)."),
    timeout_s: float = typer.Option(None, "--timeout-s", help="Per-task worker wall-clock limit, seconds."),
    max_attempts: int = typer.Option(None, "--max-attempts", help="Attempts per task on infrastructure failure."),
    fake: bool = typer.Option(False, "--fake", help="FakeRunner instead of the judge: simulated verdicts, no GPU."),
    runner_args: str = typer.Option("{}", "--runner-args", help="JSON keyword arguments for the runner."),
    allowed_host: list[str] = typer.Option(None, "--allowed-host", help="A host name clients reach the service by "
                                           "(repeatable; localhost, IP addresses and this machine's names always work)."),
    prebuild_workers: int = typer.Option(None, "--prebuild-workers", help="Threads that build queued CUDA candidates "
                                         "ahead of their GPU (0: none; default 2)."),
    log_level: str = typer.Option("info", "--log-level"),
) -> None:
    """Serve /evaluate, /sanitize, /profile, /health, /definitions and /tasks until interrupted.

    Without a shared token, a per-start token is written to a 0600 file (printed at start); every request that
    changes state must carry it, loopback included. The client, `profiler health`, `eval --server` and `worker`
    read it for a loopback URL themselves. Every request's Host must name this service."""
    try:
        from ptxcore.gpu.service.config import InsecureBindError, token_from_env_or_file
        from ptxcore.gpu.service.server import build_config, serve
        from ptxcore.gpu.service.tokenfile import TokenFileError
    except ImportError as exc:
        raise UserError(f"the profiling service needs the gpu extra (pip install 'ptxbench[gpu]'): {exc}") from exc
    try:
        args = json.loads(runner_args)
    except ValueError as exc:
        raise UserError(f"--runner-args is not JSON: {exc}") from exc
    try:
        config = build_config(gpus=gpus, host=host, port=port, work_dir=work_dir,
                              token=token_from_env_or_file(token_file), fake=fake, runner_args=args,
                              timeout_s=timeout_s, max_attempts=max_attempts, allowed_hosts=allowed_host,
                              prebuild_workers=prebuild_workers)
    except (InsecureBindError, ValueError) as exc:
        raise UserError(str(exc).splitlines()[0]) from exc
    try:
        serve(config, log_level=log_level,
              on_ready=lambda url, token_path: typer.echo(
                  f"profiling service on {url} (GPUs {config.gpus}{', FAKE runner' if fake else ''}); work dir "
                  f"{config.work_dir}; " + (f"per-start token in {token_path}" if token_path else "shared token"),
                  err=True))
    except TokenFileError as exc:
        raise UserError(str(exc)) from exc
    except OSError as exc:
        raise UserError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from exc


@app.command("health")
@one_line_errors
def health_command(
    server: str = typer.Option(..., "--server", help="Service URL, e.g. http://127.0.0.1:8765."),
    as_json: bool = typer.Option(False, "--json", help="Print the raw JSON."),
) -> None:
    """Show the service's GPUs: state, condition, tasks, temperature, free memory (token: the loopback service's
    per-start token file, else $PTXBENCH_PROFILER_TOKEN)."""
    from ptxcore.gpu.service.client import ProfilerClient, ProfilerError

    try:
        with ProfilerClient(server, timeout_s=30) as c:
            data = c.health()
    except ProfilerError as exc:
        raise UserError(f"{server}: {exc}") from exc
    if as_json:
        typer.echo(json.dumps(data, indent=1))
        return
    typer.echo(f"{data['status']}  pending={data['pending']} running={data['running']}")
    for g in data["gpus"]:
        h = g.get("health") or {}
        free = h.get("memory_free_bytes")
        typer.echo(f"  GPU {g['gpu']}: {g['state']:<10} {g['condition']:<12} scored={g['tasks_scored']} "
                   f"excluded={g['tasks_excluded']} restarts={g['restarts']} temp={h.get('temperature_c')} C "
                   f"free={'?' if free is None else free >> 30} GiB {'; '.join(g['reasons'])}")
