"""`ptxbench sql` is untrusted input: one read-only statement, nothing outside the warehouse file reachable.

Hostile cases first (each: one error line, non-zero exit, no file written, the other warehouse untouched),
then the statements that must keep working, then the output formats.
"""

from __future__ import annotations

import csv
import io
import json
import os

import pytest
from typer.testing import CliRunner

from flows.cli.main import app
from flows.cli.sql import format_float
from ptxcore.warehouse import Warehouse

from .conftest import campaign, full_turn, trajectory

runner = CliRunner()
SECRET = "TOPSECRET-0123456789"


@pytest.fixture
def dbs(tmp_path):
    """Two warehouses (a: 2 turns, b: 3 turns) and a secret file beside them."""
    for name, n in (("a", 2), ("b", 3)):
        with Warehouse(tmp_path / f"{name}.duckdb") as w:
            w.upsert_campaign(campaign("c1"))
            w.upsert_trajectory(trajectory())
            w.upsert_turns([full_turn(turn=i) for i in range(n)])
    (tmp_path / "secret.txt").write_text(SECRET + "\n")
    return tmp_path


def snapshot(folder):
    return {p.name: (p.stat().st_size, p.stat().st_mtime_ns) for p in folder.iterdir()}


def turn_count(path) -> int:
    with Warehouse(path, read_only=True) as w:
        return w.sql("SELECT count(*) FROM turns")[1][0][0]


def sql(db, query, *extra):
    return runner.invoke(app, ["sql", query, "--db", str(db), *extra])


def refused(r) -> str:
    assert r.exit_code == 2, r.output
    assert "Traceback" not in r.output
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), r.stderr
    assert r.stdout == ""
    return lines[0]


HOSTILE = [
    ("ATTACH '{b}' AS other (READ_WRITE); DELETE FROM other.turns", "exactly one statement"),
    ("ATTACH '{b}' AS other (READ_WRITE)", "got ATTACH"),
    ("DELETE FROM turns", "got DELETE"),
    ("CREATE TABLE x AS SELECT 1", "got CREATE"),
    ("COPY turns TO '{d}/out.csv'", "got COPY"),
    ("EXPORT DATABASE '{d}/export'", "got EXPORT"),
    ("SELECT * FROM read_text('{d}/secret.txt')", "file system operations are disabled"),
    ("SELECT content FROM read_blob('{d}/secret.txt')", "file system operations are disabled"),
    ("SELECT * FROM read_csv('/etc/passwd')", "file system operations are disabled"),
    ("WITH s AS (SELECT * FROM read_text('{d}/secret.txt')) SELECT * FROM turns, s", "disabled"),
    ("SELECT * FROM query('SELECT * FROM read_text(''{d}/secret.txt'')')", "disabled"),
    ("SELECT * FROM glob('{d}/*')", "file system operations are disabled"),
    ("INSTALL httpfs", "got LOAD"),
    ("LOAD httpfs", "got LOAD"),
    ("SELECT 1; SELECT 2", "exactly one statement is accepted, got 2"),
    ("SET enable_external_access = true", "got SET"),
    ("RESET lock_configuration", "got"),
    ("SELECT 1; SET enable_external_access = true", "exactly one statement"),
    ("PRAGMA threads=1", "got SET"),
    ("CALL pragma_version()", "got CALL"),
    ("CHECKPOINT", "got"),
    ("DETACH a", "got DETACH"),
    ("", "no SQL statement"),
    ("/* only a comment */", "no SQL statement"),
    ("SELEC 1", "syntax error"),
]


@pytest.mark.parametrize(("query", "needle"), HOSTILE, ids=[q[:40] for q, _ in HOSTILE])
def test_hostile_statements_are_refused_and_touch_nothing(dbs, query, needle):
    before, b_turns = snapshot(dbs), turn_count(dbs / "b.duckdb")
    line = refused(sql(dbs / "a.duckdb", query.format(b=dbs / "b.duckdb", d=dbs)))
    assert needle in line
    assert SECRET not in line
    assert snapshot(dbs) == before  # no file written, created or changed (either warehouse, any WAL)
    assert turn_count(dbs / "b.duckdb") == b_turns and turn_count(dbs / "a.duckdb") == 2


def test_directory_listing_is_not_leaked(dbs):
    line = refused(sql(dbs / "a.duckdb", f"SELECT * FROM glob('{dbs}/*')"))
    assert "secret.txt" not in line and "b.duckdb" not in line


def test_the_configuration_is_locked_before_the_users_statement(dbs):
    r = sql(dbs / "a.duckdb", "SELECT name, value FROM duckdb_settings() "
            "WHERE name IN ('enable_external_access', 'lock_configuration', 'temp_directory') ORDER BY 1",
            "--format", "json")
    assert r.exit_code == 0, r.output
    assert {x["name"]: x["value"] for x in json.loads(r.stdout)} == {
        "enable_external_access": "false", "lock_configuration": "true", "temp_directory": ""}


READ_ONLY_OK = [
    "SELECT count(*) AS n FROM turns",
    "WITH t AS (SELECT * FROM turns) SELECT count(*) AS n FROM t",
    "FROM turns SELECT count(*) AS n",
    "SELECT count(*) AS n FROM v_turn_outcomes",
    "SELECT count(*) AS n FROM turns WHERE json_extract_string(compile_json, '$.status') = 'COMPILED'",
    "SELECT count(*) AS n FROM (DESCRIBE turns) WHERE column_name = 'turn'",
]


@pytest.mark.parametrize("query", READ_ONLY_OK)
def test_read_only_statements_run(dbs, query):
    r = sql(dbs / "a.duckdb", query, "--format", "json")
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)[0]["n"] in (1, 2)


def test_show_and_explain_run(dbs):
    assert "turns" in sql(dbs / "a.duckdb", "SHOW TABLES", "--format", "csv").stdout
    r = sql(dbs / "a.duckdb", "EXPLAIN SELECT * FROM turns", "--format", "json")
    assert r.exit_code == 0 and "physical_plan" in r.stdout


def test_a_missing_warehouse_is_not_created(tmp_path):
    assert "no warehouse at" in refused(sql(tmp_path / "nope.duckdb", "SELECT 1"))
    assert list(tmp_path.iterdir()) == []


# -- output formats (issue 18 item 1) ------------------------------------------------------------------------
WIDE = ("SELECT 1.23456789::DOUBLE AS a_rather_long_column_name_that_a_narrow_table_would_cut, "
        "'gqa_paged_decode_h24_kv8_d128_ps1/variant/with/a/long/identifier/0' AS identifier, "
        "'nan'::DOUBLE AS not_a_number, NULL AS nothing, 12 AS n")


def test_table_rounds_floats_and_never_truncates_when_piped(dbs):
    r = sql(dbs / "a.duckdb", WIDE)
    assert r.exit_code == 0, r.output
    out = r.stdout
    assert "a_rather_long_column_name_that_a_narrow_table_would_cut" in out
    assert "gqa_paged_decode_h24_kv8_d128_ps1/variant/with/a/long/identifier/0" in out
    assert " 1.235 " in out and "1.2345" not in out
    assert "…" not in out and "\x1b[" not in out  # no ellipsis, no colour codes in a pipe
    assert out.startswith("1 rows")


def test_table_escapes_control_characters_and_markup(dbs):
    r = sql(dbs / "a.duckdb", "SELECT 'a' || chr(27) || '[31mred' || chr(10) || 'b' AS \"[bold]x[/]\"")
    assert r.exit_code == 0, r.output
    assert "\x1b" not in r.stdout and "[bold]x[/]" in r.stdout and "a\\x1b[31mred\\nb" in r.stdout


def test_csv_keeps_full_precision(dbs):
    r = sql(dbs / "a.duckdb", WIDE, "--format", "csv")
    assert r.exit_code == 0, r.output
    rows = list(csv.reader(io.StringIO(r.stdout)))
    assert rows[0][0] == "a_rather_long_column_name_that_a_narrow_table_would_cut"
    assert rows[1] == ["1.23456789", "gqa_paged_decode_h24_kv8_d128_ps1/variant/with/a/long/identifier/0", "nan", "",
                       "12"]


def test_json_is_valid_with_unique_keys_and_strings_for_non_finite(dbs):
    r = sql(dbs / "a.duckdb", "SELECT 1 AS a, 2 AS a, 'inf'::DOUBLE AS x, 0.1::DOUBLE AS y", "--format", "json")
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout) == [{"a": 1, "a_1": 2, "x": "Infinity", "y": 0.1}]
    legacy = sql(dbs / "a.duckdb", "SELECT 1 AS a", "--json")
    assert json.loads(legacy.stdout) == [{"a": 1}]


def test_large_results_stream_and_the_table_counts_every_row(dbs):
    r = sql(dbs / "a.duckdb", "SELECT range AS i FROM range(5000)", "--max-rows", "3")
    assert r.exit_code == 0 and r.stdout.startswith("5000 rows (first 3 shown)")
    r = sql(dbs / "a.duckdb", "SELECT range AS i FROM range(5000)", "--format", "json")
    assert [x["i"] for x in json.loads(r.stdout)] == list(range(5000))


def test_a_zero_reads_like_the_rest_of_its_column(dbs):
    """`0` beside `0.2500` read as a different kind of value: a zero gets the column's decimals."""
    r = sql(dbs / "a.duckdb", "SELECT x FROM (VALUES (0.0::DOUBLE), (0.25::DOUBLE), (0.4::DOUBLE)) t(x) ORDER BY x")
    assert r.exit_code == 0, r.output
    cells = [ln.strip("│ ") for ln in r.stdout.splitlines() if ln.startswith("│")]
    assert cells == ["0.0000", "0.2500", "0.4000"]


@pytest.mark.parametrize(("x", "text"), [
    (1.23456789, "1.235"), (0.0123456, "0.01235"), (1234567.89, "1234568"), (0.0, "0"), (-2.5, "-2.500"),
    (1e-7, "1.000e-07"), (float("nan"), "NaN"), (float("-inf"), "-inf"), (100.0, "100.0"),
])
def test_format_float(x, text):
    assert format_float(x) == text


def test_sql_never_uses_the_environment_for_files(dbs, monkeypatch):
    monkeypatch.setenv("HOME", str(dbs))  # DuckDB's extension/secret dirs live under HOME: nothing may appear
    before = snapshot(dbs)
    refused(sql(dbs / "a.duckdb", "SELECT * FROM duckdb_secrets()"))
    assert snapshot(dbs) == before and not os.path.exists(dbs / ".duckdb")
