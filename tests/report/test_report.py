"""Report: table layouts, Markdown/HTML and PNG figures on the published excerpt and on our own records."""

from __future__ import annotations

import re
import struct

import pytest

from ptxcore.metrics import turn_metrics
from ptxcore.report import ReportError, build_report, correctness_tables
from ptxcore.report.render import ReportDoc, cell_html, to_html, to_markdown
from ptxcore.report.tables import Table, fmt_range, fmt_rate, fmt_speedup, triple_cell
from ptxcore.schema import EvaluationStatus, TargetInstruction
from ptxcore.warehouse import Warehouse
from ptxcore.warehouse import queries as Q

from .conftest import full_turn, trajectory

EXPECTED_FILES = {"report.md", "report.html", "fast_p_inst.png", "fast_p.png", "status_by_turn.png",
                  "transitions.png", "reasoning_vs_speedup.png"}


def png_size(path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG"
    return struct.unpack(">II", data[16:24])


def test_formatting():
    assert (fmt_rate(0.0), fmt_rate(None), fmt_rate(0.0625)) == ("0.0", "n/a", "6.2")
    assert (fmt_speedup(None), fmt_speedup(1.0116), fmt_speedup(0.0)) == ("n/a", "1.01", "0.00")
    assert fmt_range(0.104, 0.0, 0.156) == "10.4 [0.0–15.6]"
    assert triple_cell(["1", "2", "3"], ["4", "5", "6"]) == "target 1 / 2 / 3 (all 4 / 5 / 6)"


def test_each_symbol_means_one_thing(excerpt_db, tmp_path):
    """Zero reads 0.0, a missing best speedup n/a, and the en dash appears only between two numbers (a range)."""
    with Warehouse(excerpt_db, read_only=True) as wh:
        outcomes = Q.turn_outcomes(wh, Q.select_runs(wh, ["opus48-*"]))
    build_report(outcomes, tmp_path, "symbols")
    rows = [ln for ln in (tmp_path / "report.md").read_text().splitlines() if ln.startswith("| ")]
    cells = " ".join(rows)
    assert "target 0.0 / 0.0 / 12.5 (all " in cells and "target n/a / 0.23 / 0.27 (all 0.04 " in cells
    assert "| 96 | 0.0 | 1.0 |" in cells and "32.3 [12.5–56.2]" in cells
    assert re.findall(r"(?<![0-9])–|–(?![0-9])", cells) == []  # every dash sits between two numbers


def test_report_on_published_excerpt(excerpt_db, tmp_path):
    with Warehouse(excerpt_db, read_only=True) as wh:
        outcomes = Q.turn_outcomes(wh, Q.select_runs(wh, ["opus48-*", "glm52-*", "gemini-*", "qwen36-b200-*"]))
    steps: list[str] = []
    paths = build_report(outcomes, tmp_path, "excerpt", on_step=steps.append)
    assert {p.name for p in paths} == EXPECTED_FILES and steps[-1] == "write"
    md = (tmp_path / "report.md").read_text()
    assert "### Turn correctness rate, % (k = 1 / 4 / 8) — blackwell" in md
    assert "| Claude Opus 4.8 | target 25.0 / 64.6 / 80.2 (all 75.0 / 81.2 / 88.5) |" in md
    assert "### Best speedup (k = 1 / 4 / 8) — hopper" in md and "by prompt variant" in md and "per model, mean over problems" in md
    html = (tmp_path / "report.html").read_text()
    assert html.count("<table>") == md.count("\n### ") and '<img src="fast_p_inst.png"' in html
    for name in EXPECTED_FILES - {"report.md", "report.html"}:
        w, h = png_size(tmp_path / name)
        assert w >= 600 and h >= 300


def test_two_runs_for_one_cell_is_refused(excerpt_db):
    with Warehouse(excerpt_db, read_only=True) as wh:
        outcomes = Q.turn_outcomes(wh, Q.select_runs(wh, ["qwen36-27b-*"]))
    relabelled = [o.model_copy(update={"definition": "same"}) for o in outcomes]
    with pytest.raises(ReportError, match="two runs for Qwen3.6-27B / hopper / same"):
        correctness_tables(turn_metrics(relabelled))


def test_report_on_our_own_campaign_with_unjudged_turns(tmp_path):
    """A campaign written through the runner's API: one judged trajectory, one without a GPU judge."""
    with Warehouse(tmp_path / "w.duckdb") as wh:
        wh.upsert_trajectories([trajectory(trajectory_id=t, prompt_variant=v) for t, v in (("t0", "full"), ("t1", "full"))])
        wh.upsert_turns([full_turn(trajectory="t0", turn=n, prompt_variant="full") for n in range(3)] + [
            full_turn(trajectory="t1", turn=n, prompt_variant="full", judge=None, speedup=None,
                      status=EvaluationStatus.NOT_EVALUATED, target_instruction=TargetInstruction.UNKNOWN)
            for n in range(2)] + [
            full_turn(trajectory="t2", turn=0, problem="mha_bwd_d128", judge=None, speedup=None,
                      status=EvaluationStatus.NOT_EVALUATED, target_instruction=TargetInstruction.UNKNOWN)])
        outcomes = Q.turn_outcomes(wh, ["c1"])
    build_report(outcomes, tmp_path / "rep", "demo")
    md = (tmp_path / "rep" / "report.md").read_text()
    # gemm: t0 has 3 correct executed turns, t1 2 unjudged -> k=1: 1/2, k=4: 3/8, k=8: 3/16;
    # mha_bwd_d128 has no judged turn at all -> "n/e" (not evaluated) rather than zeros
    assert "| replay/demo | target 50.0 / 37.5 / 18.8 (all 50.0 / 37.5 / 18.8) | n/e |" in md
    assert '"n/e": not evaluated' in md
    assert "3 turns were not evaluated" in md


def test_a_five_turn_campaign_with_recorded_verdicts_says_what_it_counts(tmp_path):
    """The demo's shape: 5-turn trajectories that never stop early, GPU verdicts reused from an H200 recording.
    k = 8 counts the 5 turns (not 8 slots), nothing speaks of stopping early, every cell says "recorded", and the
    per-model table is headed by the model."""
    from ptxcore.schema import RecordedVerdict

    rec = RecordedVerdict(source="campaigns/recorded/h200", trace_sha256="ef" * 32, gpu_name="NVIDIA H200",
                          driver_version="580.159.04", judged_at="2026-12-01T11:50:45+00:00")
    with Warehouse(tmp_path / "w.duckdb") as wh:
        wh.upsert_trajectories([trajectory(trajectory_id="t0", max_turns=5)])
        base = full_turn(trajectory="t0")
        wh.upsert_turns([full_turn(trajectory="t0", turn=n, judge=base.judge.model_copy(update={"recorded": rec}))
                         for n in range(5)])
        outcomes = Q.turn_outcomes(wh, ["c1"])
    build_report(outcomes, tmp_path / "rep", "demo")
    md = (tmp_path / "rep" / "report.md").read_text()
    assert "### Turn correctness rate, % (k = 1 / 4 / 8 = all 5 turns) — hopper" in md
    assert "| replay/demo | target 100.0 / 100.0 / 100.0 (all 100.0 / 100.0 / 100.0) recorded |" in md
    assert "stopped early" not in md and "ended before their turn budget" not in md
    assert "5 of 5 turns carry verdicts recorded earlier (NVIDIA H200, driver 580.159.04, 2026-12-01)" in md
    assert "| model | arch | gemm_n7168_k5120 | mean |" in md and "| condition |" not in md
    assert "| model | arch | turns | PASSED | recorded verdicts |" in md
    html = (tmp_path / "rep" / "report.html").read_text()
    assert html.count("recorded") >= md.count("recorded")


def test_empty_selection_is_refused(tmp_path):
    with pytest.raises(ReportError, match="no turns"):
        build_report([], tmp_path, "empty")


def test_render_escapes():
    doc = ReportDoc(title="a<b", notes=["x|y"], tables=[Table(title="t", header=["h|1"], rows=[["<td>"]], key="k")],
                    figures=[])
    assert "h\\|1" in to_markdown(doc)
    html = to_html(doc)
    assert "&lt;td&gt;" in html and "<title>a&lt;b</title>" in html


def test_html_cells_break_between_parts_never_inside_a_triple():
    assert cell_html("target 1.0 / 2.0 / 3.0 (all 4.0 / 5.0 / 6.0)") == (
        '<span class="nw">target 1.0 / 2.0 / 3.0</span> <span class="nw">(all 4.0 / 5.0 / 6.0)</span>')
    assert cell_html("10.4 [0.0–15.6]") == '<span class="nw">10.4 [0.0–15.6]</span>'
    html = to_html(ReportDoc(title="t", notes=[], tables=[Table(title="t", header=["h"], rows=[["a (b)"]])], figures=[]))
    assert "span.nw{white-space:nowrap}" in html and '<div class="table"><table>' in html


def test_groups_with_only_cpu_verdicts_and_unjudged_turns_read_not_evaluated():
    from ptxcore.metrics.turns import TurnOutcome
    from ptxcore.report.tables import unjudged_groups

    def outcome(definition: str, turn: int, status: EvaluationStatus) -> TurnOutcome:
        return TurnOutcome(run="r", model="m", arch="hopper", definition=definition, prompt_variant="v",
                           trajectory_id="t", turn=turn, status=status,
                           target_instruction=TargetInstruction.UNKNOWN, speedup=None, reasoning_tokens=0,
                           max_turns=8)

    S = EvaluationStatus
    rows = [
        outcome("cpu_and_unjudged", 0, S.COMPILE_ERROR), outcome("cpu_and_unjudged", 1, S.NOT_EVALUATED),
        outcome("all_compile_errors", 0, S.COMPILE_ERROR), outcome("all_compile_errors", 1, S.EXTRACTION_ERROR),
        outcome("gpu_and_unjudged", 0, S.INCORRECT_NUMERICAL), outcome("gpu_and_unjudged", 1, S.NOT_EVALUATED),
        outcome("infra_only", 0, S.INFRA_ERROR),
    ]
    assert unjudged_groups(rows) == {("m", "hopper", "cpu_and_unjudged"), ("m", "hopper", "infra_only")}


def test_generalization_problems_get_the_figure_6_table_and_plot(tmp_path):
    """d64 against its d128 base, and a GQA problem without a single judged turn."""
    from ptxcore.report.generalization import base_problem, family

    assert (family("mha_bwd_d64_causal"), family("mha_with_lse_d96"), family("gqa_paged_decode_h24_kv8_d128_ps1"),
            family("mha_with_lse_d128"), family("gemm_n7168_k5120")) == ("d64", "d96", "GQA", None, None)
    assert base_problem("mha_bwd_d64_causal") == "mha_bwd_d128_causal" and base_problem("gqa_x_d128") is None
    gqa = "gqa_paged_decode_h24_kv8_d128_ps1"
    with Warehouse(tmp_path / "w.duckdb") as wh:
        wh.upsert_trajectories([trajectory(trajectory_id=t, problem=p, prompt_variant="full") for t, p in
                                (("t0", "mha_with_lse_d64"), ("t1", "mha_with_lse_d128"), ("t2", gqa))])
        wh.upsert_turns([full_turn(trajectory="t0", turn=0, problem="mha_with_lse_d64", prompt_variant="full",
                                   speedup=0.63),
                         full_turn(trajectory="t1", turn=0, problem="mha_with_lse_d128", prompt_variant="full",
                                   speedup=0.66),
                         full_turn(trajectory="t2", turn=0, problem=gqa, prompt_variant="full", judge=None,
                                   speedup=None, status=EvaluationStatus.NOT_EVALUATED,
                                   target_instruction=TargetInstruction.UNKNOWN)])
        outcomes = Q.turn_outcomes(wh, ["c1"])
    paths = build_report(outcomes, tmp_path / "rep", "generalization")
    md = (tmp_path / "rep" / "report.md").read_text()
    assert "| mha_with_lse_d64 | d64 | mha_with_lse_d128 | 12.5 · 0.63 (d128: 12.5 · 0.66) |" in md
    assert f"| {gqa} | GQA | none | n/e |" in md
    assert "| mha_with_lse_d128 | " not in md.split("Figure 6 style")[1].split("\n\n")[0]  # the base is no row
    width, height = png_size(tmp_path / "rep" / "generalization.png")
    assert tmp_path / "rep" / "generalization.png" in paths and width > 600 and height > 600
