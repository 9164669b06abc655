"""`ptxbench warehouse import-ptxbench|export|export-traces|import-traces|invalidate`: the DuckDB warehouse."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from pathlib import Path

import typer

from .errors import UserError, one_line_errors
from .output import echo_json

app = typer.Typer(help="The DuckDB warehouse: imports, Parquet export, FlashInfer-Trace interchange.",
                  no_args_is_help=True)

JSON_OPTION = typer.Option(False, "--json", help="Print what was done as JSON (counts, written paths).")

DB_OPTION = typer.Option(..., "--warehouse", "--db", envvar="PTXBENCH_DB",
                         help="Warehouse file (DuckDB); --db is the same option; env PTXBENCH_DB.")
"""The one name of the warehouse option on every command (`--warehouse`; `--db` kept as an alias)."""


@contextlib.contextmanager
def warehouse_errors() -> Iterator[None]:
    """Turn the warehouse's expected errors into one-line user errors."""
    from ptxcore.report import ReportError
    from ptxcore.warehouse import WarehouseError
    from ptxcore.warehouse.interchange import InterchangeError
    from ptxcore.warehouse.invalidation import InvalidationError
    from ptxcore.warehouse.ptxbench_import import PTXBenchImportError

    try:
        yield
    except (WarehouseError, PTXBenchImportError, InterchangeError, ReportError, InvalidationError) as exc:
        raise UserError(str(exc).strip().splitlines()[0]) from exc


def open_warehouse(db: str, read_only: bool):
    from ptxcore.warehouse import Warehouse

    if read_only and not Path(db).is_file():
        raise UserError(f"no warehouse at {db}")
    return Warehouse(db, read_only=read_only)


@contextlib.contextmanager
def stage(label: str) -> Iterator[None]:
    """A spinner on stderr while one stage runs (rich), then its wall time."""
    from rich.console import Console

    console = Console(stderr=True)
    t0 = time.perf_counter()
    with console.status(label):
        yield
    console.print(f"{label} done in {time.perf_counter() - t0:.2f} s")


@app.command("import-ptxbench")
@one_line_errors
def import_ptxbench(csv: str = typer.Argument(..., help="The authors' per-turn CSV, plain or .gz (shipped: "
                                             "data/ptxbench/ptxbench_per_turn.csv.gz)."),
                    db: str = DB_OPTION, as_json: bool = JSON_OPTION) -> None:
    """Import the PTXBench authors' per-turn results: one run (campaign) per exp_dir."""
    from ptxcore.warehouse.ptxbench_import import import_ptxbench_csv, read_ptxbench_csv

    if not Path(csv).is_file():
        raise UserError(f"no such file: {csv}")
    with warehouse_errors(), stage(f"importing {csv}"):
        parsed = read_ptxbench_csv(csv)  # the whole file is read and checked before the warehouse is touched
        with open_warehouse(db, read_only=False) as wh:
            counts = import_ptxbench_csv(wh, csv, parsed)
    if as_json:
        return echo_json({"warehouse": db, **counts})
    typer.echo(f"imported {counts['turns']} turns, {counts['trajectories']} trajectories, {counts['runs']} runs into {db}")


@app.command("export")
@one_line_errors
def export(db: str = DB_OPTION, out: str = typer.Option(..., "--out", help="Folder for <table>.parquet files."),
           as_json: bool = JSON_OPTION) -> None:
    """Write every warehouse table as Parquet."""
    with warehouse_errors(), stage("exporting Parquet"), open_warehouse(db, read_only=True) as wh:
        paths = wh.export_parquet(Path(out))
    if as_json:
        return echo_json([str(p) for p in paths])
    for p in paths:
        typer.echo(str(p))


@app.command("export-traces")
@one_line_errors
def export_traces(campaign: str = typer.Argument(..., help="Campaign id."), db: str = DB_OPTION,
                  out: str = typer.Option(..., "--out", help="Dataset folder to write."),
                  as_json: bool = JSON_OPTION) -> None:
    """Export a campaign's evaluations as a FlashInfer-Trace dataset (definitions, workloads, solutions, traces)."""
    from ptxcore.warehouse.interchange import export_campaign_traces

    with warehouse_errors(), stage(f"exporting {campaign}"), open_warehouse(db, read_only=True) as wh:
        counts = export_campaign_traces(wh, campaign, Path(out))
    if as_json:
        return echo_json({"out": out, **counts})
    typer.echo(f"wrote {counts['traces']} traces, {counts['solutions']} solutions, {counts['definitions']} definitions "
               f"to {out} ({counts['skipped_turns']} turns without a verdict or kernel skipped)")


@app.command("import-traces")
@one_line_errors
def import_traces(folder: str = typer.Argument(..., help="FlashInfer-Trace dataset folder (e.g. problems/)."),
                  db: str = DB_OPTION, as_json: bool = JSON_OPTION) -> None:
    """Import definitions, workloads, solutions and traces of a FlashInfer-Trace dataset folder."""
    from ptxcore.warehouse.interchange import import_dataset

    with warehouse_errors(), stage(f"importing {folder}"), open_warehouse(db, read_only=False) as wh:
        counts = import_dataset(wh, Path(folder))
    if as_json:
        return echo_json({"warehouse": db, **counts})
    typer.echo(", ".join(f"{v} {k}" for k, v in counts.items()) + f" imported into {db}")


@app.command("invalidate")
@one_line_errors
def invalidate(
    turn: list[str] = typer.Option(None, "--turn", help="CAMPAIGN/TRAJECTORY/TURN (repeatable)."),
    kernel: list[str] = typer.Option(None, "--kernel", help="Kernel sha256: every turn with it (repeatable)."),
    reason: str = typer.Option(..., "--reason", help="Why (required; stored with who and when)."),
    db: str = DB_OPTION,
    revoke: bool = typer.Option(False, "--revoke", help="Undo an earlier invalidation of these targets."),
    by: str = typer.Option(None, "--by", help="Who (default: the login name)."),
) -> None:
    """Mark turns or kernels invalid after the fact (e.g. a reward hack found later), or --revoke that.

    Nothing is deleted: the event (who, when, why) is appended to the `invalidations` table and the turn rows
    stay. The metric views, reports and turn-metrics leave invalidated turns out (as if unplayed); MLflow is
    reconciled (runs tagged ptxbench.invalid_turns) the next time the campaign is run or resumed.
    Listed by `ptxbench sql "SELECT * FROM v_invalid_turns" --db F`.
    """
    import getpass

    from ptxcore.warehouse.invalidation import InvalidationTarget

    if not Path(db).is_file():
        raise UserError(f"no warehouse at {db}")
    with warehouse_errors():
        targets = [InvalidationTarget.parse_turn(t) for t in turn or []]
        targets += [InvalidationTarget.parse_kernel(k) for k in kernel or []]
        with open_warehouse(db, read_only=False) as wh:
            done = wh.invalidate(targets, reason, actor=by or _login(getpass), revoke=revoke)
    verb = "revoked the invalidation of" if revoke else "invalidated"
    typer.echo(f"{verb} {', '.join(done.targets)}: {done.turns_affected} turns affected in {db}")


def _login(getpass) -> str:
    try:
        return getpass.getuser()
    except (OSError, KeyError):
        return "unknown"
