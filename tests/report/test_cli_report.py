"""`ptxbench report CAMPAIGN... --db FILE --out DIR`."""

from __future__ import annotations

from typer.testing import CliRunner

from flows.cli.main import app

runner = CliRunner()


def test_report_command_writes_tables_and_plots(excerpt_db, tmp_path):
    out = tmp_path / "rep"
    r = runner.invoke(app, ["report", "opus48-*", "glm52-mha-bwd-d128", "--db", str(excerpt_db), "--out", str(out)])
    assert r.exit_code == 0, r.output
    assert {p.name for p in out.iterdir()} >= {"report.md", "report.html", "fast_p_inst.png", "transitions.png"}
    md = (out / "report.md").read_text()
    (glm_row,) = [line for line in md.splitlines() if line.startswith("| GLM-5.2 |") and "target" in line][:1]
    assert glm_row == "| GLM-5.2 |  | target 8.3 / 6.2 / 5.2 (all 8.3 / 18.8 / 16.7) |"  # hopper columns: gemm, mha_bwd
    same = runner.invoke(app, ["report", "build", "opus48-gemm", "--db", str(excerpt_db), "--out", str(tmp_path / "b")])
    assert same.exit_code == 0, same.output


def test_report_command_errors(excerpt_db, tmp_path):
    r = runner.invoke(app, ["report", "qwen36-27b-*", "nope-*", "--db", str(excerpt_db), "--out", str(tmp_path)])
    assert r.exit_code == 2 and "error: no campaign with turns matches 'nope-*'" in r.stderr
