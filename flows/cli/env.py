"""`ptxbench env demo | serve`: the judge as a training environment (ptxcore.gym) from the command line.

`demo` plays episodes with a replay policy (no API key) and records them like a campaign: on a CPU machine a kernel
an H200 judged earlier gets its recorded verdict (campaigns/recorded/h200), marked recorded; on a GPU host the real
judge runs. It prints every episode's return and writes the warehouse, which `ptxbench report` reads unchanged.
`serve` starts the HTTP front for trainers in another process (loopback and a per-start token by default).
"""

from __future__ import annotations

from pathlib import Path

import typer

from .errors import UserError, one_line_errors, read_text_file
from .output import add_row, console_for, fmt_float, print_table, table

app = typer.Typer(help="The judge as a training environment: demo episodes, the HTTP front.", no_args_is_help=True)
REPO = Path(__file__).resolve().parents[2]
DEMO_RECORDED = REPO / "campaigns" / "recorded" / "h200"
DEMO_RUN_ID = "env-demo"


def _errors() -> tuple[type[BaseException], ...]:
    from ptxcore.agent import CampaignConfigError
    from ptxcore.agent.replay import ReplayError
    from ptxcore.agent.yamlfile import YamlModelError
    from ptxcore.gpu.service.tokenfile import TokenFileError
    from ptxcore.gym import EnvSpecError
    from ptxcore.judge import RouteError
    from ptxcore.warehouse import WarehouseError

    return (CampaignConfigError, ReplayError, YamlModelError, EnvSpecError, RouteError, WarehouseError, TokenFileError,
            ValueError, OSError)


def demo_specs(problems: str | None, turns: int, run_id: str, policy: str, reward: str | None, profile: str,
               variant: str) -> list:
    """The demo's specs: one per problem (default: the primary ones); ValueError naming the bad option."""
    from pydantic import ValidationError

    from ptxcore.gym import DEFAULT_REWARD, EnvSpec, load_reward_spec
    from ptxcore.problems import load_catalog

    catalog = load_catalog()
    names = [p.strip() for p in problems.split(",") if p.strip()] if problems else \
        sorted(n for n, p in catalog.items() if p.extension.primary)
    unknown = [n for n in names if n not in catalog]
    if unknown or not names:
        raise UserError(f"--problems: unknown problem {unknown[0][:80]!r}" if unknown else "--problems: none given")
    spec_reward = load_reward_spec(reward) if reward else DEFAULT_REWARD
    try:
        return [EnvSpec(run_id=run_id, problem=n, prompt_variant=variant, max_turns=turns, reward=spec_reward,
                        profile=profile, policy_model=policy) for n in names]
    except ValidationError as exc:
        first = exc.errors()[0]
        raise UserError(f"--{str(first['loc'][0]).replace('_', '-')}: {first['msg']}") from None


@app.command("demo")
@one_line_errors
def demo_command(
    problems: str = typer.Option(None, "--problems", "-p", help="Comma-separated problems (default: the primary 5)."),
    episodes: int = typer.Option(1, "--episodes", min=1, max=64, help="Episodes per problem."),
    turns: int = typer.Option(5, "--turns", min=1, max=8, help="Turn budget (the replay scripts tell five)."),
    policy: str = typer.Option("replay/demo", "--policy", help="A replay policy: replay/<library>."),
    judge: str = typer.Option("auto", "--judge", help="Judge route: auto | local | none | URL | recorded:PATH."),
    reward: str = typer.Option(None, "--reward", help="Reward spec YAML (default: the documented staged spec)."),
    profile: str = typer.Option("standard", "--profile", help="Evaluation profile: quick | standard | thorough."),
    variant: str = typer.Option("hopper-pack", "--variant", help="Prompt variant (knowledge level)."),
    run_id: str = typer.Option(DEMO_RUN_ID, "--run-id", help="Campaign id the episodes are recorded under."),
    warehouse: str = typer.Option(None, "--warehouse", help="Warehouse file (default runs/<run-id>/warehouse.duckdb)."),
    mlflow_uri: str = typer.Option(None, "--mlflow-uri", help="MLflow tracking URI (default: ./mlruns sqlite)."),
    concurrency: int = typer.Option(2, "--concurrency", min=1, max=64, help="Episodes in flight."),
) -> None:
    """Play replay-policy episodes against the judge, print each episode's return, write the warehouse."""
    if not policy.startswith("replay/"):
        raise UserError(f"--policy {policy[:80]!r}: the demo plays a replay policy (replay/<library>)")
    try:
        _demo(problems, episodes, turns, policy, judge, reward, profile, variant, run_id, warehouse, mlflow_uri,
              concurrency)
    except _errors() as exc:
        raise UserError(str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__) from None


def _demo(problems: str | None, episodes: int, turns: int, policy: str, judge: str, reward: str | None, profile: str,
          variant: str, run_id: str, warehouse: str | None, mlflow_uri: str | None, concurrency: int) -> None:
    from flows.env import play
    from flows.replay import make_client
    from ptxcore.agent import ModelSpec, check_campaign_id
    from ptxcore.gym import spec_prompt
    from ptxcore.judge import JudgeRoute

    check_campaign_id(run_id, "--run-id")
    JudgeRoute.parse(judge)  # a bad route: one line before anything starts
    specs = demo_specs(problems, turns, run_id, policy, reward, profile, variant)
    for spec in specs:  # an unknown variant, or one of another architecture: one line before anything is written
        spec_prompt(spec)
    client = make_client(ModelSpec(model=policy), "--policy")
    wh = Path(warehouse or f"runs/{run_id}/warehouse.duckdb").resolve()
    err = console_for(stderr=True)
    err.print(f"playing {len(specs) * episodes} episode(s) of {policy} (judge {judge}); recording to {wh}",
              markup=False, highlight=False)
    results = play(specs, client, route=judge, recorded=str(DEMO_RECORDED), warehouse=wh, tracking_uri=mlflow_uri,
                   episodes=episodes, concurrency=concurrency,
                   on_episode=lambda r: err.print(f"  {r.trajectory_id}: return {r.total_reward:.3f}",
                                                  markup=False, highlight=False))
    t = table(f"Environment run {run_id}: returns", ["episode", "steps", "verdicts", "return", "discounted",
                                                      "best speedup", "stop"], right=["steps", "return", "discounted"])
    for r in results:
        add_row(t, r.trajectory_id, len(r.rewards), " ".join(s.value for s in r.statuses), f"{r.total_reward:.3f}",
                f"{r.discounted_return:.3f}", fmt_float(r.best_speedup), r.stop_reason.value)
    print_table(t)
    console_for().print(f"reward spec {specs[0].reward.sha256[:12]} (gamma {specs[0].reward.gamma:g}); report: "
                        f"ptxbench report {run_id} --db {wh} --out reports/{run_id}", markup=False, highlight=False)


@app.command("serve")
@one_line_errors
def serve_command(
    judge: str = typer.Option("auto", "--judge", help="Judge route: auto | local | none | URL | recorded:PATH."),
    host: str = typer.Option("127.0.0.1", "--host", help="Bind address; non-loopback requires a shared token."),
    port: int = typer.Option(8790, "--port", min=0, max=65535, help="TCP port (0: any free port)."),
    token_file: str = typer.Option(None, "--token-file", help="File holding the shared token (else "
                                   "$PTXBENCH_ENV_TOKEN; neither: a per-start token in a 0600 file)."),
    allowed_host: list[str] = typer.Option(None, "--allowed-host", help="A host name clients use (repeatable)."),
    reward: str = typer.Option(None, "--reward", help="Reward spec YAML of environments that send none."),
    run_id: str = typer.Option("env-serve", "--run-id", help="Campaign id the episodes are recorded under."),
    warehouse: str = typer.Option(None, "--warehouse", help="Warehouse file (default runs/<run-id>/warehouse.duckdb)."),
    mlflow_uri: str = typer.Option(None, "--mlflow-uri", help="MLflow tracking URI (default: ./mlruns sqlite)."),
    max_envs: int = typer.Option(256, "--max-envs", min=1, max=100_000, help="Environments open at once."),
    max_in_flight: int = typer.Option(16, "--max-in-flight", min=1, max=1024, help="Steps judged at once."),
) -> None:
    """Serve environments over HTTP to a trainer in another process or on another machine."""
    try:
        _serve(judge, host, port, token_file, allowed_host or [], reward, run_id, warehouse, mlflow_uri, max_envs,
               max_in_flight)
    except _errors() as exc:
        raise UserError(str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__) from None


def _serve(judge: str, host: str, port: int, token_file: str | None, allowed: list[str], reward: str | None,
           run_id: str, warehouse: str | None, mlflow_uri: str | None, max_envs: int, max_in_flight: int) -> None:
    import os

    from pydantic import ValidationError

    from flows.env import serve
    from ptxcore.agent import check_campaign_id
    from ptxcore.gym import DEFAULT_REWARD, load_reward_spec
    from ptxcore.gym.http import EnvServerConfig
    from ptxcore.gym.http.client import TOKEN_ENV
    from ptxcore.judge import JudgeRoute

    check_campaign_id(run_id, "--run-id")
    JudgeRoute.parse(judge)
    token = os.environ.get(TOKEN_ENV) or None
    if token_file:
        lines = read_text_file(token_file).strip().splitlines()
        token = lines[0].strip() if lines else None
    try:
        config = EnvServerConfig(host=host, port=port, token=token, allowed_hosts=allowed)
    except ValidationError as exc:
        first = exc.errors()[0]
        raise UserError(f"--{str(first['loc'][0]).replace('_', '-')}: {first['msg']}") from None
    spec = load_reward_spec(reward) if reward else DEFAULT_REWARD
    wh = Path(warehouse or f"runs/{run_id}/warehouse.duckdb").resolve()
    serve(judge, str(DEMO_RECORDED), run_id, wh, mlflow_uri, config, spec, max_envs, max_in_flight,
          on_ready=lambda url, path: typer.echo(
              f"environments at {url} (judge {judge}, recording to {wh}; "
              + (f"per-start token in {path})" if path else "shared token)"), err=True))


@app.command("rescore-sql")
@one_line_errors
def rescore_sql_command(
    reward: str = typer.Option(None, "--reward", help="Reward spec YAML (default: the documented staged spec)."),
) -> None:
    """Print the SELECT that re-scores every recorded step with a reward spec (for `ptxbench sql`)."""
    from ptxcore.agent.yamlfile import YamlModelError
    from ptxcore.gym import DEFAULT_REWARD, load_reward_spec
    from ptxcore.gym.rescore import rescore_sql

    try:
        spec = load_reward_spec(reward) if reward else DEFAULT_REWARD
    except YamlModelError as exc:
        raise UserError(str(exc)) from None
    typer.echo(rescore_sql(spec))
