"""Terminal output a pipe can use: whole identifiers, --json, one warehouse option, flags shown as flags."""

from __future__ import annotations

import json
import re

import pytest
from typer.testing import CliRunner

from flows.cli.main import app
from ptxcore.schema import EvaluationStatus, StopReason, TargetInstruction
from ptxcore.warehouse import Warehouse
from tests.warehouse.conftest import full_turn, trajectory

runner = CliRunner()


def invoke(*args: str, **env: str):
    return runner.invoke(app, list(args), env={"COLUMNS": "40", **env})


def test_a_piped_listing_shows_every_name_whole():
    r = invoke("problems", "list")
    assert r.exit_code == 0, r.output
    names = json.loads(invoke("problems", "list", "--json").stdout)
    for row in names:  # a 40-column terminal would fold them; a pipe gets the table at its natural width
        assert re.search(rf"│ {re.escape(row['name'])} +│", r.stdout), row["name"]
    assert "…" not in r.stdout


def test_problems_show_reads_as_text_and_as_json():
    text = invoke("problems", "show", "gqa_paged_decode_h24_kv8_d128_ps1")
    assert text.exit_code == 0, text.output
    assert "baseline: flashinfer" in text.stdout and "target instructions: hopper: gmma, tma" in text.stdout
    assert re.search(r"│ k_cache +│ input +│ \[num_pages, page_size, num_kv_heads, head_dim\] +│ bfloat16 +│", text.stdout)
    shown = json.loads(invoke("problems", "show", "gqa_paged_decode_h24_kv8_d128_ps1", "--json").stdout)
    assert shown["extension"]["baseline"]["library"] == "flashinfer"


@pytest.mark.parametrize("command", [("problems", "list"), ("campaign", "run"), ("campaign", "status"),
                                     ("report", "turn-metrics"), ("prompts", "variants")])
def test_help_shows_flags_without_a_type(command):
    r = runner.invoke(app, [*command, "--help"], env={"COLUMNS": "120"})
    assert r.exit_code == 0
    assert "<bool>" not in r.stdout and re.search(r"--json +\S", r.stdout)


def test_one_warehouse_option_with_db_as_its_alias(excerpt_db):
    a = invoke("report", "turn-metrics", "--warehouse", str(excerpt_db), "--run", "opus48-gemm", "--json")
    b = invoke("report", "turn-metrics", "--db", str(excerpt_db), "--run", "opus48-gemm", "--json")
    assert a.exit_code == b.exit_code == 0 and json.loads(a.stdout) == json.loads(b.stdout) != []
    table = invoke("report", "turn-metrics", "--warehouse", str(excerpt_db), "--run", "opus48-gemm")
    assert "│ opus48-gemm │ Claude Opus 4.8 │ hopper │ gemm_n7168_k5120 │ 1 │" in table.stdout
    assert re.search(r"│ +91\.7 │ +91\.7 │ +0\.770 │ +0\.770 │", table.stdout)  # percent, rounded
    for cmd in (("warehouse", "export", "--help"), ("sql", "--help"), ("campaign", "status", "--help"),
                ("campaign", "run", "--help")):
        assert "--warehouse" in runner.invoke(app, list(cmd), env={"COLUMNS": "200"}).stdout, cmd


@pytest.fixture
def cpu_campaign(tmp_path):
    """A campaign as a CPU machine records it: compiled turns NOT_EVALUATED, one compile error."""
    path = tmp_path / "w.duckdb"
    ne = dict(judge=None, speedup=None, gpu="", status=EvaluationStatus.NOT_EVALUATED,
              target_instruction=TargetInstruction.UNKNOWN)
    with Warehouse(path) as wh:
        wh.upsert_trajectories([trajectory(campaign="cpu", trajectory_id=t, stop_reason=StopReason.MAX_TURNS)
                                for t in ("t0", "t1")])
        wh.upsert_turns([full_turn(campaign="cpu", trajectory="t0", turn=0, **ne),
                         full_turn(campaign="cpu", trajectory="t0", turn=1, **ne),
                         full_turn(campaign="cpu", trajectory="t1", turn=0, **ne)])
    return path


def test_campaign_status_draws_the_run_table_and_says_not_evaluated(cpu_campaign):
    r = invoke("campaign", "status", "cpu", "--warehouse", str(cpu_campaign))
    assert r.exit_code == 0, r.output
    assert "Campaign cpu: headline" in r.stdout and "┏" in r.stdout  # a table, not Markdown
    row = next(ln for ln in r.stdout.splitlines() if ln.startswith("│ replay/demo"))
    assert "│ 0/3 (no GPU) │" in row and len(re.findall(r"│ +not evaluated (?=│)", row)) == 4 and "–" not in row
    assert "3 compiled turns were NOT_EVALUATED" in r.stdout and "max_turns: 2" in r.stdout
    data = json.loads(invoke("campaign", "status", "cpu", "--db", str(cpu_campaign), "--json").stdout)
    assert data["stop_reasons"] == {"max_turns": 2} and data["headline"][0]["not_evaluated"] == 3


def test_recorded_verdicts_are_marked(tmp_path):
    from ptxcore.agent import headline_markdown, headline_rows
    from ptxcore.schema import RecordedVerdict

    def recorded(turn):
        rec = full_turn(campaign="rec", trajectory="t0", turn=turn)
        reused = RecordedVerdict(source="campaigns/recorded", trace_sha256="ab" * 32, gpu_name="NVIDIA H200",
                                 driver_version="580.65", judged_at="2026-11-28T10:00:00+00:00")
        return rec.model_copy(update={"judge": rec.judge.model_copy(update={"recorded": reused})})

    md = headline_markdown(headline_rows([recorded(0), recorded(1)], [trajectory(campaign="rec")]))
    # every GPU column says so, "GPU-judged" too (it counts verdicts nobody measured in this run)
    assert ("| 2/2 (100%) recorded | 2/2 (100%) recorded | 2/2 (100%) recorded | 1/1 (100%) recorded "
            "| 0.91x recorded |") in md
    assert "2 of 2 GPU verdicts are recorded: reused from earlier judgements" in md
    assert "NVIDIA H200, driver 580.65, 2026-11-28" in md
    assert '"solved" (trajectories solved): trajectories with at least one correct (PASSED) turn, at any speedup' in md
    mixed = headline_markdown(headline_rows([recorded(0), full_turn(campaign="rec", trajectory="t0", turn=1)]))
    assert "| 2/2 (100%) (1 recorded) | 2/2 (100%) (1 recorded) |" in mixed


def test_status_of_a_missing_campaign_is_one_line(cpu_campaign):
    r = invoke("campaign", "status", "nope", "--warehouse", str(cpu_campaign))
    assert r.exit_code == 2 and r.output.strip() == f"error: no campaign 'nope' in {cpu_campaign}"


def test_the_hidden_character_class_is_every_control_format_and_separator_character():
    """flows.cli.output.HIDDEN is written out for speed: it must hold exactly the code points of its categories."""
    import sys
    import unicodedata

    from flows.cli.output import HIDDEN_CATEGORIES, _hidden, visible

    pattern = _hidden("")
    for cp in range(sys.maxunicode + 1):
        hidden = unicodedata.category(chr(cp)) in HIDDEN_CATEGORIES
        assert bool(pattern.fullmatch(chr(cp))) is hidden, hex(cp)
    assert visible("evil\u202etxt.exe\x1b[2J") == "evil\\u202etxt.exe\\x1b[2J"


def test_headline_cells_escape_hidden_characters():
    from rich.table import Table

    from flows.cli.output import add_row

    t = Table("a")
    add_row(t, "model\u202e\x1b[31m")
    assert t.columns[0]._cells[0].plain == "model\\u202e\\x1b[31m"
