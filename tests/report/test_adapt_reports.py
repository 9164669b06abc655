"""Adapt reports on the authors' published runs: Tables 8 / 9 (with the paper's trajectory subset), Table 4,
Figure 15; Table 10 from manifests; the CLI and its one-line errors.

What is checked against what (see docs/adapt-reports.md):
- the paper: every cell of its Tables 8 and 9 for s0-s6 (rates at k = 1 / 4 / 8 with and without the target-
  instruction condition, target best speedups) and the retrieval rows of Table 4, transcribed below from a stored
  copy of the paper, against our tables with `--trajectories paper`; the differences are listed and each is a turn
  whose target-instruction verdict differs between the two files the authors published;
- that `paper` is the only choice of 3 of the 5 prompt variants consistent with the paper, per problem family;
- the authors' own aggregates (their plot-viewer CSVs, over all 20 trajectories): correct turns at k = 1 / 4 / 8
  of every run behind Tables 8 / 9 (ALL20_CORRECT_TURNS), and their Fixit notes' first-four-turn status counts of
  the s2 MHA runs; our `all` subset reproduces them exactly.
"""

from __future__ import annotations

import gzip
import json
import struct
from itertools import combinations

import pytest
from typer.testing import CliRunner

from flows.cli.main import app
from ptxcore.metrics import turn_metrics
from ptxcore.report import ReportError
from ptxcore.report.adapt_build import (
    FIGURE15,
    build_reasoning_report,
    build_recipes_report,
    build_sft_report,
)
from ptxcore.report.adapt_tables import retrieval_tables, sft_tables
from ptxcore.report.published import PUBLISHED_FIGURE15_RUNS, PUBLISHED_RETRIEVAL_RUNS, published_sft_runs
from ptxcore.report.reasoning_plot import ALL_PROBLEMS, lengths_by_problem, summarize
from ptxcore.report.recipes import ManifestError, RecipeManifest, load_manifest, recipe_table
from ptxcore.report.subsets import PAPER_VARIANTS, SubsetError, parse_subset
from ptxcore.warehouse import Warehouse
from ptxcore.warehouse import queries as Q

from .conftest import EXCERPT_CSV

ADAPT_RUNS_GZ = EXCERPT_CSV.parent / "ptxbench_adapt_runs.csv.gz"
PAPER = parse_subset("paper")
ALL = parse_subset("all")
PROBLEMS = ["gemm_n7168_k5120", "mha_with_lse_d128", "mha_with_lse_d128_causal", "mha_bwd_d128", "mha_bwd_d128_causal"]
NONE = "target 0.0 / 0.0 / 0.0 (all 0.0 / 0.0 / 0.0)"  # measured zeros (the report writes 0.0 for a measured 0)

# The paper's Table 8 (turn correctness %, k = 1 / 4 / 8: target-instruction rate, then all correct turns) and
# Table 9 (target best speedup) for the columns GEMM, MHA-Fwd, MHA-Fwd-Causal, MHA-Bwd, MHA-Bwd-Causal; "-" is
# the paper's dash, "-/-/-" an empty cell.
E = "-/-/-"
PAPER_TABLE8 = {
    "s0": (["-/-/-", "-/6.2/5.2", "-/2.1/1.0", E, "-/-/1.0"], ["-/-/-", "-/6.2/5.2", "-/2.1/1.0", E, "-/-/1.0"]),
    "s1": (["25.0/14.6/13.5", "16.7/16.7/19.8", "-/-/3.1", "-/2.1/4.2", "-/2.1/4.2"],
           ["25.0/14.6/13.5", "16.7/16.7/19.8", "-/-/3.1", "-/2.1/4.2", "-/2.1/5.2"]),
    "s2": (["-/2.1/2.1", "-/2.1/5.2", "-/-/1.0", "-/-/1.0", E], ["-/2.1/2.1", "-/2.1/5.2", "-/-/1.0", "-/-/1.0", E]),
    "s3": (["-/2.1/3.1", "-/4.2/2.1", "-/6.2/4.2", "-/4.2/4.2", E], ["-/2.1/3.1", "-/4.2/2.1", "-/6.2/4.2", "-/4.2/4.2", E]),
    "s4": (["8.3/8.3/10.4", "-/-/4.2", "-/4.2/2.1", "-/-/1.0", E], ["8.3/8.3/10.4", "-/-/4.2", "-/4.2/2.1", "-/-/1.0", E]),
    "s5": (["16.7/14.6/12.5", "-/2.1/4.2", "-/2.1/3.1", "-/-/5.2", "-/-/4.2"],
           ["16.7/14.6/12.5", "-/2.1/4.2", "-/2.1/3.1", "-/-/5.2", "-/-/4.2"]),
    "s6": (["8.3/2.1/1.0", E, E, E, E], ["8.3/2.1/1.0", E, E, E, E]),
}
PAPER_TABLE9 = {
    "s0": [E, "-/0.589/0.589", "-/0.644/0.644", E, "-/-/0.209"],
    "s1": ["0.303/0.303/0.340", "0.556/0.556/0.565", "-/-/0.395", "-/0.380/0.389", "-/0.192/0.199"],
    "s2": ["-/0.209/0.211", "-/0.548/0.548", "-/-/0.315", "-/-/0.296", E],
    "s3": ["-/0.274/0.280", "-/0.465/0.465", "-/0.388/0.388", "-/0.494/0.494", E],
    "s4": ["0.276/0.373/0.373", "-/-/0.452", "-/0.383/0.383", "-/-/0.199", E],
    "s5": ["0.325/0.446/0.446", "-/0.425/0.573", "-/0.241/0.246", "-/-/0.295", "-/-/0.246"],
    "s6": ["0.073/0.073/0.073", E, E, E, E],
}
# The paper's Table 4 row "Qwen3.6-27B + retrieved repair notes and fixed kernel" (MHA-Fwd, -Causal, -Bwd, -Causal);
# its rows for base Qwen3.6-27B and "+ retrieved repair notes" are empty.
PAPER_TABLE4_ORACLE = (["-/29.2/29.2", "-/20.8/27.1", "-/14.6/18.8", "-/20.8/33.3"],
                       ["-/29.2/29.2", "-/20.8/27.1", "-/14.6/20.8", "-/25.0/37.5"])
# Where we differ from the paper (and why: docs/adapt-reports.md). Each is a target-instruction rate, the
# all-turn rates agree: the per-turn file marks one more correct turn as target-executing than the paper counts, and
# the authors' own aggregate (arch_instruction_correctness_by_release_date.csv) agrees with the paper there.
KNOWN_TABLE8_DIFFERENCES = {("s1", "mha_bwd_d128_causal", "target"): ("-/2.1/4.2", "-/2.1/5.2")}
KNOWN_TABLE4_DIFFERENCES = {("mha_bwd_d128", "target"): ("-/14.6/18.8", "-/14.6/20.8"),
                            ("mha_bwd_d128_causal", "target"): ("-/20.8/33.3", "-/22.9/34.4")}

# Correct turns with turn < 1 / 4 / 8 over all 20 trajectories: equal to the `n_correct_turns` column of the
# authors' benchmark/plot_viewer_v1/data/arch_instruction_correctness_by_release_date.csv for these runs
# (checked for all 40 SFT-table runs and the 8 retrieval runs; runs not listed have none).
ALL20_CORRECT_TURNS = {
    "2026-0624-0939-gemm": (5, 14, 26), "2026-0624-0939-mha-bwd-d128": (0, 1, 4),
    "2026-0624-0939-mha-bwd-d128-causal": (0, 2, 6), "2026-0624-0939-mha-d128": (2, 10, 26),
    "2026-0624-0939-mha-d128-causal": (0, 0, 8), "2026-0624-1022-gemm": (0, 0, 1),
    "2026-0624-1022-mha-bwd-d128-causal": (0, 0, 1), "2026-0624-1022-mha-d128": (0, 3, 6),
    "2026-0624-1022-mha-d128-causal": (0, 1, 2), "2026-0626-0012-gemm": (0, 6, 14),
    "2026-0626-0012-mha-bwd-d128": (0, 3, 6), "2026-0626-0012-mha-d128": (0, 3, 5),
    "2026-0626-0012-mha-d128-causal": (0, 3, 8), "2026-0629-2229-gemm": (0, 3, 6),
    "2026-0629-2229-mha-bwd-d128": (0, 0, 2), "2026-0629-2229-mha-d128": (0, 1, 8),
    "2026-0629-2229-mha-d128-causal": (0, 1, 5), "2026-0712-0058-gemm": (2, 7, 16),
    "2026-0712-0058-mha-bwd-d128": (0, 0, 1), "2026-0712-0058-mha-bwd-d128-causal": (0, 0, 1),
    "2026-0712-0058-mha-d128": (0, 0, 6), "2026-0712-0058-mha-d128-causal": (0, 2, 3),
    "2026-0716-1808-full-gemm": (4, 11, 19), "2026-0716-1808-full-mha-bwd-d128": (0, 0, 5),
    "2026-0716-1808-full-mha-bwd-d128-causal": (0, 1, 7), "2026-0716-1808-full-mha-d128": (0, 2, 7),
    "2026-0716-1808-full-mha-d128-causal": (0, 1, 6), "2026-0721-1837-fixit-v6-full-patched-gemm": (1, 1, 1),
    "2026-0721-1837-fixit-v6-full-patched-mha-d128-causal": (0, 0, 1),
}
# The authors' fix_kernels/FIXIT_SETTINGS.md: turns 0-3 of the 2026-0629-2229-mha* roots (s2), 80 per problem.
S2_FIRST_FOUR_TURNS = {
    "mha_bwd_d128": {"COMPILE_ERROR": 46, "RUNTIME_ERROR": 26, "TIMEOUT": 8},  # 24 runtime + 2 "Other error"
    "mha_bwd_d128_causal": {"COMPILE_ERROR": 51, "RUNTIME_ERROR": 18, "INCORRECT_NUMERICAL": 7, "TIMEOUT": 3,
                            "EXTRACTION_ERROR": 1},
    "mha_with_lse_d128": {"COMPILE_ERROR": 34, "RUNTIME_ERROR": 29, "INCORRECT_NUMERICAL": 8, "TIMEOUT": 8, "PASSED": 1},
    "mha_with_lse_d128_causal": {"COMPILE_ERROR": 35, "RUNTIME_ERROR": 22, "INCORRECT_NUMERICAL": 14, "TIMEOUT": 8,
                                 "PASSED": 1},
}


@pytest.fixture(scope="module")
def adapt_db(tmp_path_factory):
    """A warehouse holding the 53 published runs behind Tables 4 / 8 / 9 and Figure 15 (committed, gzip-compressed)."""
    from ptxcore.warehouse.ptxbench_import import import_ptxbench_csv

    root = tmp_path_factory.mktemp("adapt")
    csv_path = root / "adapt_runs.csv"
    csv_path.write_bytes(gzip.decompress(ADAPT_RUNS_GZ.read_bytes()))
    with Warehouse(root / "w.duckdb") as wh:
        counts = import_ptxbench_csv(wh, str(csv_path))
    assert counts == {"runs": 53, "trajectories": 956, "turns": 7626}
    return root / "w.duckdb"


@pytest.fixture(scope="module")
def sft_outcomes(adapt_db):
    with Warehouse(adapt_db, read_only=True) as wh:
        return Q.turn_outcomes(wh, Q.select_runs(wh, published_sft_runs()))


def _rows(table):
    return {row[0]: row[1:] for row in table.rows}


def _paper_notation(outcomes, model, problem) -> tuple[str, str, str]:
    """(target rates, all rates, target best speedups) at k = 1 / 4 / 8, written as the paper writes them."""
    by_k = {m.k: m for m in turn_metrics([o for o in outcomes if o.model == model and o.definition == problem])}

    def rate(x):
        return "-" if not x else f"{100 * x:.1f}"

    def speed(x):
        return "-" if not x else f"{x:.3f}"

    ks = (1, 4, 8)
    return ("/".join(rate(by_k[k].target_turn_correct_rate) for k in ks),
            "/".join(rate(by_k[k].turn_correct_rate) for k in ks),
            "/".join(speed(by_k[k].target_best_speedup) for k in ks))


def test_tables_8_and_9_match_the_paper(sft_outcomes):
    chosen = PAPER.select(sft_outcomes)
    differences = {}
    for sft, (target8, all8) in PAPER_TABLE8.items():
        for i, problem in enumerate(PROBLEMS):
            ours = _paper_notation(chosen, f"Qwen3.6-27B-{sft}", problem)
            for what, paper, mine in zip(("target", "all", "speedup"), (target8[i], all8[i], PAPER_TABLE9[sft][i]),
                                         ours, strict=True):
                if paper != mine:
                    differences[(sft, problem, what)] = (paper, mine)
    assert differences == KNOWN_TABLE8_DIFFERENCES  # 104 of the 105 cells are the paper's
    # the cell quoted in issue 15: 3 of 48 turns with the paper's subset, 3 of 80 over all 20 trajectories
    assert _paper_notation(chosen, "Qwen3.6-27B-s0", "mha_with_lse_d128")[1] == "-/6.2/5.2"
    assert _paper_notation(sft_outcomes, "Qwen3.6-27B-s0", "mha_with_lse_d128")[1] == "-/3.8/3.8"


def test_the_papers_subset_is_the_only_consistent_choice(sft_outcomes):
    """Per problem, intersect over s0-s6 the choices of 3 of the 5 variants that reproduce the paper's cells."""
    for i, problem in enumerate(PROBLEMS):
        consistent = None
        for sft, (target8, all8) in PAPER_TABLE8.items():
            wanted = (target8[i], all8[i], PAPER_TABLE9[sft][i])
            if (sft, problem, "target") in KNOWN_TABLE8_DIFFERENCES:  # the one disputed verdict: compare the rest
                wanted = (None, *wanted[1:])
            ok = set()
            for combo in combinations(["p0", "p1", "p2", "p3", "p4"], 3):
                got = _paper_notation([o for o in sft_outcomes if o.prompt_variant in combo], f"Qwen3.6-27B-{sft}",
                                      problem)
                if all(w is None or w == g for w, g in zip(wanted, got, strict=True)):
                    ok.add(combo)
            consistent = ok if consistent is None else consistent & ok
        assert consistent == {PAPER_VARIANTS[problem]}, problem
    first12 = parse_subset("first:12").select(sft_outcomes)
    assert first12 == parse_subset("variants:p0,p1,p2").select(sft_outcomes) != PAPER.select(sft_outcomes)


def test_tables_8_and_9_layout(sft_outcomes):
    t8, t9 = sft_tables(PAPER.select(sft_outcomes))
    assert t8.key == "table8_hopper" and t9.key == "table9_hopper" and t8.title.startswith("Table 8: SFT models")
    assert t8.header == ["model", "gemm_n7168_k5120", "mha_bwd_d128", "mha_bwd_d128_causal", "mha_with_lse_d128",
                         "mha_with_lse_d128_causal"]
    rows8, rows9 = _rows(t8), _rows(t9)
    assert list(rows8) == ["Qwen3.6-27B", *(f"Qwen3.6-27B-s{i}" for i in range(7))]
    assert rows8["Qwen3.6-27B"] == [NONE] * 5  # the base model has no correct turn on these five problems
    assert rows8["Qwen3.6-27B-s5"][0] == "target 16.7 / 14.6 / 12.5 (all 16.7 / 14.6 / 12.5)"
    assert rows9["Qwen3.6-27B-s5"][0] == "target 0.32 / 0.45 / 0.45 (all 0.32 / 0.45 / 0.45)"  # 0.325 / 0.446


def test_all_20_trajectories_reproduce_the_authors_aggregates(sft_outcomes):
    counted: dict[str, list[int]] = {}
    for o in sft_outcomes:
        if o.correct:
            c = counted.setdefault(o.run, [0, 0, 0])
            for i, k in enumerate((1, 4, 8)):
                c[i] += o.turn < k
    assert {r: tuple(c) for r, c in counted.items()} == ALL20_CORRECT_TURNS
    s2: dict[str, dict[str, int]] = {}
    for o in sft_outcomes:
        if o.run.startswith("2026-0629-2229-mha") and o.turn < 4:
            s2.setdefault(o.definition, {}).setdefault(o.status.value, 0)
            s2[o.definition][o.status.value] += 1
    assert s2 == S2_FIRST_FOUR_TURNS


def test_table_4_matches_the_paper(adapt_db):
    with Warehouse(adapt_db, read_only=True) as wh:
        outcomes = Q.turn_outcomes(wh, Q.select_runs(wh, PUBLISHED_RETRIEVAL_RUNS))
    chosen = PAPER.select(outcomes)
    rates, speeds = retrieval_tables(chosen, {})
    assert rates.header == ["model", "condition", "arch", "mha_bwd_d128", "mha_bwd_d128_causal", "mha_with_lse_d128",
                            "mha_with_lse_d128_causal", "mean"]
    rows = {(r[0], r[1]): r[3:] for r in rates.rows}
    assert set(rows) == {("Qwen3.6-27B", "none"), ("Qwen3.6-27B", "notes"), ("Qwen3.6-27B", "notes+fixed (ORACLE)"),
                         ("Qwen3.6-27B-s1", "none")}
    assert rows[("Qwen3.6-27B", "none")] == rows[("Qwen3.6-27B", "notes")] == [NONE] * 5  # as the paper's empty rows
    oracle = "Qwen3.6-27B + retrieved repair notes and fixed kernel"
    differences = {}
    for i, problem in enumerate(["mha_with_lse_d128", "mha_with_lse_d128_causal", "mha_bwd_d128", "mha_bwd_d128_causal"]):
        target, every, _ = _paper_notation(chosen, oracle, problem)
        for what, paper, mine in (("target", PAPER_TABLE4_ORACLE[0][i], target), ("all", PAPER_TABLE4_ORACLE[1][i], every)):
            if paper != mine:
                differences[(problem, what)] = (paper, mine)
    assert differences == KNOWN_TABLE4_DIFFERENCES
    s1 = {p: _paper_notation(chosen, "Qwen3.6-27B-s1", p)[:2] for p in ("mha_bwd_d128", "mha_with_lse_d128")}
    assert s1 == {"mha_bwd_d128": ("-/2.1/4.2", "-/2.1/4.2"), "mha_with_lse_d128": ("16.7/16.7/19.8", "16.7/16.7/19.8")}
    assert {r[1]: r[-1] for r in speeds.rows if r[0] == "Qwen3.6-27B"}["notes+fixed (ORACLE)"] == \
        "target n/a / 0.53 / 0.55 (all n/a / 0.53 / 0.55)"
    from ptxcore.schema import RetrievalCondition
    base = [o for o in outcomes if o.model == "Qwen3.6-27B"]
    with pytest.raises(ReportError, match="two runs for Qwen3.6-27B · notes"):
        retrieval_tables(outcomes, {o.run: RetrievalCondition.NOTES for o in base})


def test_subset_parsing_and_natural_order(sft_outcomes):
    assert [parse_subset(s).label for s in ("all", "first:12", "variants:p0, p2", "paper")] == [
        "all", "first:12", "variants:p0,p2", "paper"]
    with pytest.raises(SubsetError, match="run 2026-0624-0939-gemm holds 5 prompt variants of other_problem"):
        PAPER.select([o.model_copy(update={"definition": "other_problem"}) for o in sft_outcomes])
    for bad in ("first:0", "first:x", "some", "variants:", "all:3", "first:-1", "paper:1"):
        with pytest.raises(SubsetError) as info:
            parse_subset(bad)
        assert "--trajectories" in str(info.value) and "\n" not in str(info.value)
    few = [o.model_copy(update={"trajectory_id": t}) for o, t in zip(sft_outcomes[:3], ["exp_10", "exp_2", "exp_1"],
                                                                      strict=True)]
    assert {o.trajectory_id for o in parse_subset("first:2").select(few)} == {"exp_1", "exp_2"}


def _png_size(path):
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">II", data[16:24])


def test_sft_report_and_figure_15(sft_outcomes, adapt_db, tmp_path):
    steps = []
    paths = build_sft_report(sft_outcomes, tmp_path / "sft", "sft", PAPER, on_step=steps.append)
    assert [p.name for p in paths] == ["report.md", "report.html", FIGURE15] and steps == ["tables", FIGURE15, "write"]
    md = (tmp_path / "sft" / "report.md").read_text()
    assert "Trajectory subset: paper (40 runs with 12 trajectories; 3838 turns)" in md
    assert "### Table 8: SFT models vs base" in md and "### Table 9: SFT models vs base" in md
    with Warehouse(adapt_db, read_only=True) as wh:
        fig15 = Q.turn_outcomes(wh, Q.select_runs(wh, PUBLISHED_FIGURE15_RUNS))
    paths = build_reasoning_report(fig15, tmp_path / "f15", "f15", PAPER)
    w, h = _png_size(tmp_path / "f15" / FIGURE15)
    assert w >= 1200 and h >= 600  # six panels: five problems and all problems
    median = {(s.group, s.panel): s.median for s in summarize(lengths_by_problem(PAPER.select(fig15)))}
    # the paper's reading of Figure 15: s3 lengthens backward-attention reasoning relative to s0, GEMM stays similar
    assert median[("Qwen3.6-27B-s0", "mha_bwd_d128_causal")] == 7200 < median[("Qwen3.6-27B-s3", "mha_bwd_d128_causal")]
    assert (median[("Qwen3.6-27B-s0", "gemm_n7168_k5120")], median[("Qwen3.6-27B-s3", "gemm_n7168_k5120")]) == (21467, 24928.5)
    assert median[("Qwen3.6-27B", ALL_PROBLEMS)] == 2723 and median[("Gemini 3.1 Pro", ALL_PROBLEMS)] == 29834.5
    table = paths[0].read_text()
    assert "| Qwen3.6-27B-s3 | 480 | 0 | 43,919 | 24,928 | 22,126 | 28,872 | 23,820 | 21,744 | 24,049 |" in table
    with pytest.raises(ReportError, match="selects no turns"):
        build_sft_report(sft_outcomes, tmp_path, "x", parse_subset("variants:nope"))


def _manifest(path, data):
    path.write_text(json.dumps(data) if not isinstance(data, str) else data)
    return path


def test_table_10_from_manifests(tmp_path):
    a = _manifest(tmp_path / "s3.json", {"recipe": "s3", "rows": 406, "kind": "fixit", "scope": "8ops-Extended",
                                         "synthesizer": "GLM-5.2", "sha256": "ignored", "dropped": [
                                             {"id": "r1", "reason": "over token budget"},
                                             {"id": "r2", "reason": "over token budget"},
                                             {"reason": "no closed code fence", "count": 3}]})
    b = _manifest(tmp_path / "x.json", {"recipe": "mine", "rows": 0, "dropped": {"no pairs": 7}})
    table = recipe_table([load_manifest(a), load_manifest(b)])
    assert table.rows == [
        ["mine", "n/a", "n/a", "n/a", "n/a", "0", "n/a", "7", "no pairs: 7", "n/a", "n/a"],
        ["s3", "fixit", "8ops-Extended", "GLM-5.2", "n/a", "406", "406", "5", "no closed code fence: 3; over token budget: 2",
         "n/a", "n/a"],
    ]
    with pytest.raises(ManifestError, match="two manifests for recipe s3"):
        recipe_table([load_manifest(a), load_manifest(a)])
    paths = build_recipes_report([load_manifest(a)], tmp_path / "rep", "recipes")
    assert "### Table 10: SFT recipes" in paths[0].read_text()


@pytest.mark.parametrize("content, message", [
    ("{not json", "x.json:1: invalid JSON"),
    ("[1]", "x.json: (top level): Input should be a valid dictionary"),
    ({"rows": 3}, "x.json: recipe: Field required"),
    ({"recipe": "s1", "rows": -1}, "x.json: rows: Input should be greater than or equal to 0"),
    ({"recipe": "s1", "rows": 1, "dropped": [{"reason": ""}]}, "x.json: dropped.0.reason: String should have at least"),
])
def test_hostile_manifests_are_one_line(tmp_path, content, message):
    path = _manifest(tmp_path / "x.json", content)
    with pytest.raises(ManifestError) as info:
        load_manifest(path)
    assert str(info.value).startswith(str(tmp_path / message.split(":")[0])) and message.split(":", 1)[1].strip() \
        .split(":")[0] in str(info.value) and "\n" not in str(info.value)
    assert RecipeManifest.model_validate({"recipe": "s1", "rows": 1}).dropped == []


def test_cli_reports_and_one_line_errors(adapt_db, tmp_path):
    runner = CliRunner()
    r = runner.invoke(app, ["report", "sft", "--published", "--db", str(adapt_db), "--out", str(tmp_path / "sft")])
    assert r.exit_code == 0, r.output
    assert r.stdout.split() == [str(tmp_path / "sft" / n) for n in ("report.md", "report.html", FIGURE15)]
    r = runner.invoke(app, ["report", "retrieval", "--published", "--db", str(adapt_db), "--out", str(tmp_path / "t4")])
    assert r.exit_code == 0 and "notes+fixed (ORACLE)" in (tmp_path / "t4" / "report.md").read_text()
    r = runner.invoke(app, ["report", "reasoning", "--published", "--db", str(adapt_db), "--out", str(tmp_path / "f")])
    assert r.exit_code == 0 and (tmp_path / "f" / FIGURE15).is_file()
    r = runner.invoke(app, ["report", "sft", "2026-0624-1022-*", "--db", str(adapt_db), "--out", str(tmp_path / "s0"),
                            "--trajectories", "all"])
    assert r.exit_code == 0 and "Trajectory subset: all (5 runs with 20 trajectories" in (
        tmp_path / "s0" / "report.md").read_text()
    manifest = _manifest(tmp_path / "m.json", {"recipe": "s1", "rows": 158})
    r = runner.invoke(app, ["report", "recipes", str(manifest), "--out", str(tmp_path / "t10")])
    assert r.exit_code == 0 and "| s1 |" in (tmp_path / "t10" / "report.md").read_text()
    for args, message in (
        (["sft", "--published", "--trajectories", "first:zero"], "--trajectories 'first:zero'"),
        (["sft", "x*", "--published"], "either run ids or --published"),
        (["sft"], "name at least one run"),
        (["sft", "nothing-like-this*"], "no campaign with turns matches"),
        (["recipes", str(_manifest(tmp_path / "bad.json", "{"))], "bad.json:1: invalid JSON"),
        (["recipes", str(tmp_path / "missing.json")], "no such manifest"),
    ):
        extra = [] if args[0] == "recipes" else ["--db", str(adapt_db)]
        r = runner.invoke(app, ["report", *args, *extra, "--out", str(tmp_path / "err")])
        assert r.exit_code == 2 and message in r.output and "Traceback" not in r.output, (args, r.output)
        assert len(r.output.strip().splitlines()) == 1


def test_conditions_recorded_by_our_own_campaigns(tmp_path):
    from ptxcore.schema import AugmentationStatus, FeedbackAugmentation, RetrievalCondition
    from ptxcore.warehouse import WarehouseError
    from ptxcore.warehouse.retrieval import run_conditions

    from .conftest import full_turn

    def aug(condition):
        return FeedbackAugmentation(condition=condition, status=AugmentationStatus.NOT_FAILING)

    with Warehouse(tmp_path / "w.duckdb") as wh:
        wh.upsert_turns([full_turn(campaign="base", turn=0),
                         full_turn(campaign="with-notes", turn=0, augmentation=aug(RetrievalCondition.NOTES)),
                         full_turn(campaign="oracle", turn=0, augmentation=aug(RetrievalCondition.NOTES_FIXED)),
                         full_turn(campaign="mixed", turn=0, augmentation=aug(RetrievalCondition.NOTES)),
                         full_turn(campaign="mixed", turn=1, augmentation=aug(RetrievalCondition.NONE))])
        runs = ["base", "with-notes", "oracle"]
        conditions = run_conditions(wh, runs)
        outcomes = Q.turn_outcomes(wh, runs)
        with pytest.raises(WarehouseError, match="run mixed recorded several retrieval conditions: none, notes"):
            run_conditions(wh, ["mixed"])
    assert conditions == {"with-notes": RetrievalCondition.NOTES, "oracle": RetrievalCondition.NOTES_FIXED}
    rates, _ = retrieval_tables(outcomes, conditions)
    assert [r[:2] for r in rates.rows] == [["replay/demo", "none"], ["replay/demo", "notes"],
                                           ["replay/demo", "notes+fixed (ORACLE)"]]


@pytest.mark.slow
def test_full_published_file_gives_the_same_tables(full_db, sft_outcomes):
    with Warehouse(full_db, read_only=True) as wh:
        full = Q.turn_outcomes(wh, Q.select_runs(wh, published_sft_runs()))
    assert sft_tables(PAPER.select(full)) == sft_tables(PAPER.select(sft_outcomes))


TIK = "tiktoken:o200k_base + qwen3-rules (ours)"


def test_table_10_reads_the_data_engines_manifest_layout(tmp_path):
    """The layout ptxcore.adapt.export writes (<build>.parquet.manifest.json), read as it is."""
    engine = {"builder": "ptxbench.adapt", "template": "fixit", "build_id": "s5", "recipe": "s5",
              "config_label": "8ops-Pre-balanced", "selection": {"balance": "pre", "per_problem_cap": 33},
              "counts": {"pairs": 300, "rows_built": 262, "rows": 258, "dropped": 4,
                         "dropped_by_reason": {"over_max_tokens": 3, "no_reasoning": 1}},
              "dropped": [{"pair_id": "a", "reason": "over_max_tokens", "total_tokens": 70000, "counted_by": TIK},
                          {"pair_id": "b", "reason": "over_max_tokens", "counted_by": TIK},
                          {"pair_id": "c", "reason": "over_max_tokens", "counted_by": TIK},
                          {"pair_id": "d", "reason": "no_reasoning", "detail": ""}],
              "tokenizer": {"name": TIK, "fallback": True, "template": "qwen3-rules (ours)"},
              "reproduces": "Table 10 s5 (8ops-Pre-balanced Fixit)", "our_inference": ["a rule we read into it"],
              "synthesizer": {"model": {"model": "openrouter/z-ai/glm-5.2", "label": "glm-5.2"}}}
    m = load_manifest(_manifest(tmp_path / "s5.json", engine))
    assert (m.recipe, m.rows, m.kind, m.scope, m.balance, m.synthesizer) == ("s5", 258, "fixit", "8ops-Pre-balanced",
                                                                             "pre", "glm-5.2")
    # which counter decided each budget drop, and that it was the fallback estimate, are in the table
    assert recipe_table([m]).rows == [["s5", "fixit", "8ops-Pre-balanced", "glm-5.2", "pre", "258", "258", "4",
                                       f"over_max_tokens [{TIK}]: 3; no_reasoning: 1", f"{TIK} (fallback estimate)",
                                       "1 (see notes)"]]
    text = build_recipes_report([m], tmp_path / "rep10", "recipes")[0].read_text()
    assert "s5: reproduces Table 10 s5 (8ops-Pre-balanced Fixit); our inference: a rule we read into it." in text


def test_table_4_of_our_runs_beside_the_published_ones(adapt_db, tmp_path):
    """`--beside-published DB`: our runs' Table 4 and the authors' re-tabulated one in one report."""
    runner = CliRunner()
    out = tmp_path / "beside"
    r = runner.invoke(app, ["report", "retrieval", "qwen36-27b-retrieved-notes-3prompt-mha-d128", "--db", str(adapt_db),
                            "--beside-published", str(adapt_db), "--out", str(out)])
    assert r.exit_code == 0, r.output
    text = (out / "report.md").read_text()
    assert text.count("— these runs") == 2 and text.count("— published runs") == 2
    assert "these runs conditions: Qwen3.6-27B · notes." in text and "notes+fixed (ORACLE)" in text
    r = runner.invoke(app, ["report", "retrieval", "--published", "--db", str(adapt_db), "--beside-published",
                            str(adapt_db), "--out", str(out)])
    assert r.exit_code == 2 and "--beside-published adds the authors' runs" in r.output
