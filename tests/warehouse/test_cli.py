"""`ptxbench warehouse ...`, `ptxbench sql` and `ptxbench report turn-metrics` through the CLI."""

from __future__ import annotations

import json

import pyarrow.parquet as pq
from typer.testing import CliRunner

from flows.cli.main import app
from ptxcore.metrics import turn_metrics
from ptxcore.warehouse import Warehouse
from ptxcore.warehouse import queries as Q

from .conftest import EXCERPT_CSV

runner = CliRunner()


def invoke(*args: str):
    return runner.invoke(app, list(args))


def one_line_error(r, code: int = 2) -> str:
    assert r.exit_code == code, r.output
    assert "Traceback" not in r.output
    lines = [line for line in r.stderr.splitlines() if line.startswith("error:")]
    assert len(lines) == 1, r.stderr
    return lines[0]


def test_import_turn_metrics_sql_and_export(tmp_path):
    db = str(tmp_path / "w.duckdb")
    r = invoke("warehouse", "import-ptxbench", str(EXCERPT_CSV), "--db", db)
    assert r.exit_code == 0, r.output
    assert "imported 1023 turns, 128 trajectories, 10 runs" in r.stdout

    r = invoke("report", "turn-metrics", "--db", db, "--json")
    assert r.exit_code == 0, r.output
    rows = json.loads(r.stdout)
    with Warehouse(db, read_only=True) as wh:
        expected = [m.to_json() for m in turn_metrics(Q.turn_outcomes(wh))]
    assert rows == expected and len(rows) == 30
    assert all(list(row) == list(expected[0]) for row in rows)
    only = json.loads(invoke("report", "turn-metrics", "--db", db, "--json", "--run", "opus48-*").stdout)
    assert {r["run"] for r in only} == {"opus48-gemm", "opus48-b200-gemm", "opus48-b200-mha-d128-causal"}
    table = invoke("report", "turn-metrics", "--db", db)
    assert table.exit_code == 0 and "turn metrics (30 rows" in table.stdout and "88.5" in table.stdout
    with_none = [x for x in rows if x["best_speedup"] is None]
    assert with_none and " n/a " in table.stdout  # a best speedup with no correct turn is said, never blank

    r = invoke("sql", "SELECT status, count(*) AS n FROM turns GROUP BY 1 ORDER BY 1", "--db", db, "--json")
    assert r.exit_code == 0, r.output
    assert {x["status"]: x["n"] for x in json.loads(r.stdout)}["PASSED"] == 288
    assert "PASSED" in invoke("sql", "SELECT DISTINCT status FROM turns", "--db", db).stdout

    r = invoke("warehouse", "export", "--db", db, "--out", str(tmp_path / "pq"))
    assert r.exit_code == 0, r.output
    assert pq.read_table(tmp_path / "pq" / "turns.parquet").num_rows == 1023


def test_cli_errors_are_one_line(tmp_path):
    db = str(tmp_path / "w.duckdb")
    assert "no such file: nope.csv" in one_line_error(invoke("warehouse", "import-ptxbench", "nope.csv", "--db", db))
    bad = tmp_path / "bad.csv"
    bad.write_text("model\nx\n")
    assert "missing columns" in one_line_error(invoke("warehouse", "import-ptxbench", str(bad), "--db", db))
    missing = str(tmp_path / "missing.duckdb")
    assert "no warehouse at" in one_line_error(invoke("sql", "SELECT 1", "--db", missing))
    assert "no warehouse at" in one_line_error(invoke("report", "turn-metrics", "--db", missing, "--json"))
    invoke("warehouse", "import-ptxbench", str(EXCERPT_CSV), "--db", db)
    assert "syntax error" in one_line_error(invoke("sql", "SELEC 1", "--db", db))
    assert "no campaign with turns matches 'zz*'" in one_line_error(
        invoke("report", "turn-metrics", "--db", db, "--run", "zz*"))
    assert "has no turns" in one_line_error(
        invoke("warehouse", "export-traces", "nope", "--db", db, "--out", str(tmp_path / "o")))


def test_import_traces_of_problems_folder(tmp_path, repo_root):
    db = str(tmp_path / "w.duckdb")
    r = invoke("warehouse", "import-traces", str(repo_root / "problems"), "--db", db)
    assert r.exit_code == 0, r.output
    assert r.stdout.startswith("16 definitions")
