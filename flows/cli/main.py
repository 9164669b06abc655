"""Entry point: `ptxbench <group> <command>`. Heavy imports happen inside commands."""

from __future__ import annotations

import logging
import os

import typer
from typer.core import TyperOption

# Prefect's ephemeral API server must answer its health check within this many seconds (Prefect's default, 20 s, was
# exceeded on a loaded 2-core machine on 2026-12-02: "Timed out while attempting to connect to ephemeral Prefect API
# server", a traceback out of `ptxbench adapt build`); a user's own setting wins.
os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "90")

from . import adapt as adapt_cmd
from . import campaign as campaign_cmd
from . import env as env_cmd
from . import problems as problems_cmd
from . import profiler as profiler_cmd
from . import prompts as prompts_cmd
from . import report as report_cmd
from . import warehouse as warehouse_cmd
from .compile import compile_command
from .eval import eval_command
from .sql import sql_command
from .worker import worker_command

_display_type = getattr(TyperOption, "display_type_rich", None)
"""typer 0.29's hook that prints `<bool>` beside every flag; older typer releases (the GPU image's) lack it."""


def _flag_display_type(self: TyperOption, ctx):  # type: ignore[no-untyped-def]
    """A flag takes no value: show no type for it (typer 0.29 prints `<bool>` beside every flag, --help too)."""
    return None if self.is_flag else _display_type(self, ctx)


if _display_type is not None:
    TyperOption.display_type_rich = _flag_display_type  # type: ignore[method-assign]

OUR_LOGGERS = ("ptxcore", "flows", "tasks")
"""Loggers of this project: they log at INFO so that Prefect's run logs get it; the terminal shows --verbose's level."""

app = typer.Typer(
    name="ptxbench",
    help="PTXBench: benchmark LLM-written CUDA kernels with architecture-specific PTX.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)
app.add_typer(problems_cmd.app, name="problems")
app.add_typer(profiler_cmd.app, name="profiler")
app.add_typer(prompts_cmd.app, name="prompts")
app.command("compile")(compile_command)
app.command("eval")(eval_command)
app.add_typer(warehouse_cmd.app, name="warehouse")
app.add_typer(report_cmd.app, name="report")
app.command("sql")(sql_command)
app.add_typer(campaign_cmd.app, name="campaign")
app.command("worker")(worker_command)
app.add_typer(adapt_cmd.app, name="adapt")
app.add_typer(env_cmd.app, name="env")


@app.callback()
def _root(verbose: bool = typer.Option(False, "--verbose", "-v", help="Log progress to stderr.")) -> None:
    level = logging.INFO if verbose else getattr(logging, os.environ.get("PTXBENCH_LOG", "WARNING").upper(), 30)
    terminal = logging.StreamHandler()
    terminal.setLevel(level)
    terminal.setFormatter(logging.Formatter("%(asctime)s %(name)s %(levelname)s %(message)s"))
    logging.basicConfig(level=level, handlers=[terminal])
    for name in OUR_LOGGERS:  # records reach Prefect's run logs at INFO; the terminal handler keeps `level`
        logging.getLogger(name).setLevel(min(level, logging.INFO))
