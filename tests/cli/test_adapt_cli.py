"""`ptxbench adapt ...`: validate output and one-line errors (bad recipe key, unknown step or campaign, build id)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from typer.testing import CliRunner

from flows.cli.main import app
from ptxcore.schema import CampaignRecord
from ptxcore.warehouse import Warehouse

REPO = Path(__file__).resolve().parents[2]
runner = CliRunner()


def invoke(*args: str):
    return runner.invoke(app, list(args))


def _one_line_error(result, *parts: str) -> None:
    assert result.exit_code == 2, result.output
    lines = [ln for ln in result.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in result.output, result.output
    for part in parts:
        assert part in lines[0], lines[0]


def test_validate_shows_what_a_recipe_selects():
    r = invoke("adapt", "validate", str(REPO / "campaigns" / "adapt" / "s5.yaml"))
    assert r.exit_code == 0, r.output
    assert "s5 (8ops-Pre-balanced): fixit, steps select, repair, pairs, reason, export" in r.output
    assert "cap 33 per problem (pre-balanced), strata error_type, turn" in r.output
    assert "teacher gemini/gemini-3.1-pro-preview: 5 turns, stop at speedup 0.15" in r.output


def test_a_bad_recipe_key_names_the_key_and_line(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text((REPO / "campaigns" / "adapt" / "s5.yaml").read_text().replace("  balance: pre\n",
                                                                                  "  balance: pre\n  balanse: post\n"))
    line = bad.read_text().splitlines().index("  balanse: post") + 1
    _one_line_error(invoke("adapt", "validate", str(bad)), f"bad.yaml:{line}: selection.balanse: unknown key")
    _one_line_error(invoke("adapt", "build", str(bad)), "selection.balanse: unknown key")


def test_build_errors_before_any_work(tmp_path):
    recipe = str(REPO / "campaigns" / "adapt" / "demo-kernelgen.yaml")
    db = tmp_path / "w.duckdb"
    _one_line_error(invoke("adapt", "build", recipe, "--warehouse", str(db)), "no warehouse at", "w.duckdb")
    with Warehouse(db) as wh:
        wh.upsert_campaign(CampaignRecord(campaign_id="other", name="other", config_yaml="", config_sha256=""))
    _one_line_error(invoke("adapt", "build", recipe, "--warehouse", str(db)),
                    "unknown campaign 'demo'", "(campaigns there: other)")
    _one_line_error(invoke("adapt", "build", recipe, "--warehouse", str(db), "--steps", "select,fix"),
                    "--steps: unknown step 'fix'")
    _one_line_error(invoke("adapt", "build", recipe, "--warehouse", str(db), "--steps", "repair"),
                    "a kernelgen recipe has no repair step")
    _one_line_error(invoke("adapt", "build", recipe, "--warehouse", str(db), "--build-id", "../x"), "--build-id '../x'")
    _one_line_error(invoke("adapt", "status", "nope", "--warehouse", str(db)), "no build 'nope'")


def test_a_build_whose_repairs_nothing_can_judge_stops_with_one_line(tmp_path):
    """No GPU, no service, no recorded verdicts: the build says so in one line before any repair is compiled, and no
    Prefect traceback reaches the terminal."""
    from ptxcore.schema import EvaluationStatus
    from tests.adapt.conftest import add_campaign, turn

    db = tmp_path / "w.duckdb"
    with Warehouse(db) as wh:
        add_campaign(wh, "src", [turn("src", "t", 0, "mha_with_lse_d128", EvaluationStatus.COMPILE_ERROR)])
    recipe = tmp_path / "r.yaml"
    recipe.write_text("name: blind\ntemplate: fixit\nselection: {source_campaigns: [src], problems: [mha_with_lse_d128],"
                      " prompt_variants: [hopper-pack], per_problem_cap: null, balance: none}\n"
                      "teacher: {model: {model: replay/adapt-teacher}}\n"
                      "synthesizer: {model: {model: replay/adapt-synth-fixit}}\n")
    # its own process: Prefect's console handler keeps the stream of the first flow run in a process, which an
    # earlier in-process invoke's runner has closed by now (a "Logging error" traceback that is not the CLI's)
    proc = subprocess.run([sys.executable, "-c", "from flows.cli.main import app; app()", "adapt", "build", str(recipe),
                           "--warehouse", str(db), "--profiler", "none"], capture_output=True, text=True, cwd=tmp_path,
                          timeout=300, env={**os.environ, "PREFECT_UI_ENABLED": "false", "PYTHONPATH": str(REPO)})
    output = proc.stdout + proc.stderr
    assert proc.returncode == 2 and "Traceback" not in output, output
    errors = [ln for ln in output.splitlines() if ln.startswith("error: ")]
    assert len(errors) == 1 and "nothing can judge the repairs here" in errors[0], output
    assert "select: 1 of 1 source turns selected" in output and "repair:" not in output


def test_status_takes_the_recipe_and_its_defaults_like_build(tmp_path, monkeypatch):
    """`campaign status ID` has a default warehouse; `adapt status` required --warehouse. Now the recipe gives
    the build id and the warehouse, as for `adapt build`; a bare build id needs --warehouse (one line says so)."""
    monkeypatch.chdir(tmp_path)
    recipe = str(REPO / "campaigns" / "adapt" / "demo-kernelgen.yaml")
    _one_line_error(invoke("adapt", "status", recipe), "no warehouse at",
                    str(tmp_path / "runs" / "demo" / "warehouse.duckdb"))
    db = tmp_path / "runs" / "demo" / "warehouse.duckdb"
    db.parent.mkdir(parents=True)
    with Warehouse(db) as wh:
        wh.upsert_campaign(CampaignRecord(campaign_id="demo", name="demo", config_yaml="", config_sha256=""))
    _one_line_error(invoke("adapt", "status", recipe), "no build 'demo-kernelgen' in", "warehouse.duckdb")
    _one_line_error(invoke("adapt", "status", "demo-kernelgen"), "'demo-kernelgen' is not a recipe file",
                    "--warehouse")
    _one_line_error(invoke("adapt", "status", "demo-kernelgen", "--db", str(db)), "no build 'demo-kernelgen'")
