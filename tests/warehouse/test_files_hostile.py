"""Dataset folders and `--out` are untrusted: `warehouse import-traces` never follows a link out of its folder
(nor quotes what it found there), `warehouse export-traces` never writes through a link planted in `--out`, and
`import-ptxbench` turns every malformed CSV into one line. Each case: one error line, non-zero exit, no
traceback, nothing imported or written."""

from __future__ import annotations

import json
import os
import shutil

import pytest
from typer.testing import CliRunner

from flows.cli.main import app
from ptxcore.judge.backends.recorded import RecordedJudge
from ptxcore.judge.route import RouteError
from ptxcore.problems import get_problem
from ptxcore.schema import EvaluationStatus, JudgeResult
from ptxcore.warehouse import Warehouse

from .conftest import KERNEL, campaign, full_turn, trajectory

runner = CliRunner()
SECRET = "TOPSECRET-0123456789"


def one_line_error(r) -> str:
    assert r.exit_code == 2, r.output
    assert "Traceback" not in r.output
    lines = [line for line in r.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:"), r.stderr
    return lines[0]


def fi_rows(db) -> int:
    with Warehouse(db, read_only=True) as w:
        return sum(w.sql(f"SELECT count(*) FROM {t}")[1][0][0]
                   for t in ("fi_definitions", "fi_workloads", "fi_solutions", "fi_traces"))


@pytest.fixture
def dataset(tmp_path, repo_root):
    """A valid dataset folder (one definition, its workloads) and a secret file outside it."""
    ds = tmp_path / "ds"
    for sub in ("definitions/gemm", "workloads/gemm"):
        (ds / sub).mkdir(parents=True)
    name = "gemm_n7168_k5120"
    shutil.copy(repo_root / "problems" / "definitions" / "gemm" / f"{name}.json", ds / "definitions" / "gemm")
    shutil.copy(repo_root / "problems" / "workloads" / "gemm" / f"{name}.jsonl", ds / "workloads" / "gemm")
    (tmp_path / "secret.txt").write_text(f'{{"name": "{SECRET}"\n')
    return ds


def import_traces(ds, db):
    return runner.invoke(app, ["warehouse", "import-traces", str(ds), "--db", str(db)])


def test_a_valid_folder_imports(dataset, tmp_path):
    r = import_traces(dataset, tmp_path / "w.duckdb")
    assert r.exit_code == 0, r.output
    assert fi_rows(tmp_path / "w.duckdb") > 1


@pytest.mark.parametrize("where", ["definitions/gemm/evil.json", "workloads/gemm/evil.jsonl"])
def test_a_file_link_out_of_the_folder_is_refused_without_its_content(dataset, tmp_path, where):
    (dataset / where).symlink_to(tmp_path / "secret.txt")
    line = one_line_error(import_traces(dataset, tmp_path / "w.duckdb"))
    assert "symbolic link" in line and where.rsplit("/", 1)[1] in line
    assert SECRET not in line and "secret.txt" not in line  # neither the content nor the target is named
    assert fi_rows(tmp_path / "w.duckdb") == 0  # nothing imported


def test_a_directory_link_is_refused(dataset, tmp_path):
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "x.jsonl").write_text(SECRET + "\n")
    (dataset / "traces").mkdir()
    (dataset / "traces" / "author").symlink_to(outside, target_is_directory=True)
    line = one_line_error(import_traces(dataset, tmp_path / "w.duckdb"))
    assert "symbolic link" in line and SECRET not in line and "elsewhere" not in line
    (dataset / "traces" / "author").unlink()
    (dataset / "traces").rmdir()
    (dataset / "workloads").rename(tmp_path / "wl")  # a top-level folder that is a link, too
    (dataset / "workloads").symlink_to(tmp_path / "wl", target_is_directory=True)
    assert "symbolic link" in one_line_error(import_traces(dataset, tmp_path / "w.duckdb"))


def test_invalid_content_is_never_quoted(dataset, tmp_path):
    (dataset / "definitions" / "gemm" / "bad.json").write_text(f'{{"name": "{SECRET}", "axes": 3}}')
    line = one_line_error(import_traces(dataset, tmp_path / "w.duckdb"))
    assert "bad.json: invalid Definition" in line and SECRET not in line


@pytest.mark.timeout(120)  # a FIFO opened for reading blocks: a regression must fail, not hang
def test_not_utf8_and_fifo(dataset, tmp_path):
    (dataset / "definitions" / "gemm" / "latin1.json").write_bytes(b'{"name": "caf\xe9"}')
    line = one_line_error(import_traces(dataset, tmp_path / "w.duckdb"))
    assert "latin1.json: not UTF-8" in line
    (dataset / "definitions" / "gemm" / "latin1.json").unlink()
    os.mkfifo(dataset / "definitions" / "gemm" / "pipe.json")  # never opened: a walk takes regular files only
    r = import_traces(dataset, tmp_path / "w.duckdb")
    assert r.exit_code == 0, r.output


def test_recorded_verdicts_refuse_links_too(dataset, tmp_path):
    (dataset / "solutions").mkdir()
    (dataset / "solutions" / "s.json").symlink_to(tmp_path / "secret.txt")
    with pytest.raises(RouteError, match="symbolic link") as info:
        RecordedJudge.open(str(dataset), "hopper")
    assert SECRET not in str(info.value) and "secret.txt" not in str(info.value)


# -- export-traces: --out may hold planted links -------------------------------------------------------------

@pytest.fixture
def judged_db(tmp_path):
    db = tmp_path / "w.duckdb"
    uuid = get_problem("gemm_n7168_k5120").primary_workload.uuid
    rec = full_turn(turn=0, kernel_text=KERNEL)
    judge = JudgeResult.model_validate({**rec.judge.model_dump(), "workload_uuid": uuid,
                                        "status": EvaluationStatus.PASSED})
    with Warehouse(db) as w:
        w.upsert_campaign(campaign("c1"))
        w.upsert_trajectory(trajectory())
        w.upsert_turns([rec.model_copy(update={"judge": judge})])
    return db


def export(db, out):
    return runner.invoke(app, ["warehouse", "export-traces", "c1", "--db", str(db), "--out", str(out)])


def files_below(folder):
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


def test_export_writes_a_fresh_folder_and_rewrites_it(judged_db, tmp_path):
    out = tmp_path / "out"
    assert export(judged_db, out).exit_code == 0
    first = files_below(out)
    assert "definitions/gemm/gemm_n7168_k5120.json" in first
    r = export(judged_db, out)  # again into the same folder: files replaced, nothing else left behind
    assert r.exit_code == 0, r.output
    assert files_below(out) == first


def test_export_refuses_a_planted_directory_link(judged_db, tmp_path):
    out, victim = tmp_path / "out", tmp_path / "victim"
    victim.mkdir()
    out.mkdir()
    (out / "definitions").symlink_to(victim, target_is_directory=True)
    line = one_line_error(export(judged_db, out))
    assert "definitions" in line and "symbolic link" in line
    assert list(victim.iterdir()) == []  # nothing written through the link
    assert files_below(out) == ["definitions"]  # and nothing else half-written


def test_export_refuses_a_planted_file_link(judged_db, tmp_path):
    out, victim = tmp_path / "out", tmp_path / "victim.txt"
    victim.write_text("precious\n")
    (out / "definitions" / "gemm").mkdir(parents=True)
    (out / "definitions" / "gemm" / "gemm_n7168_k5120.json").symlink_to(victim)
    line = one_line_error(export(judged_db, out))
    assert "gemm_n7168_k5120.json" in line and "symbolic link" in line
    assert victim.read_text() == "precious\n"
    assert not (out / "traces").exists()


def test_export_replaces_a_planted_hard_link_instead_of_writing_through_it(judged_db, tmp_path):
    out, victim = tmp_path / "out", tmp_path / "victim.txt"
    victim.write_text("precious\n")
    (out / "definitions" / "gemm").mkdir(parents=True)
    os.link(victim, out / "definitions" / "gemm" / "gemm_n7168_k5120.json")
    assert export(judged_db, out).exit_code == 0
    assert victim.read_text() == "precious\n"
    assert json.loads((out / "definitions" / "gemm" / "gemm_n7168_k5120.json").read_text())["name"] == "gemm_n7168_k5120"


def test_export_refuses_out_itself_a_link(judged_db, tmp_path):
    victim = tmp_path / "victim"
    victim.mkdir()
    (tmp_path / "out").symlink_to(victim, target_is_directory=True)
    assert "symbolic link" in one_line_error(export(judged_db, tmp_path / "out"))
    assert list(victim.iterdir()) == []


# -- import-ptxbench: the CSV is untrusted too -----------------------------------------------------------------

def test_a_csv_field_over_the_parser_limit_is_one_line(tmp_path):
    from .conftest import EXCERPT_CSV

    header, first = EXCERPT_CSV.read_text().splitlines()[:2]
    bad = tmp_path / "big.csv"
    bad.write_text(header + "\n" + first + "\n" + '"' + "x" * 131_073 + '"' + first[first.index(","):] + "\n")
    line = one_line_error(runner.invoke(app, ["warehouse", "import-ptxbench", str(bad), "--db",
                                              str(tmp_path / "w.duckdb")]))
    assert "big.csv:3" in line and "131072" in line
    latin = tmp_path / "latin1.csv"
    latin.write_bytes(header.encode() + b"\n" + first.encode().replace(b"Correct", b"Corr\xe9ct", 1) + b"\n")
    line = one_line_error(runner.invoke(app, ["warehouse", "import-ptxbench", str(latin), "--db",
                                              str(tmp_path / "w.duckdb")]))
    assert "latin1.csv" in line and "UTF-8" in line
