"""Import of the authors' per-turn CSV: mapping, idempotence, errors, and pinned Table 1 / Table 7 cells."""

from __future__ import annotations

import pytest

from ptxcore import metrics as M
from ptxcore.report.tables import correctness_tables, speedup_tables
from ptxcore.schema import EvaluationStatus, StopReason, TargetInstruction
from ptxcore.warehouse import Warehouse
from ptxcore.warehouse import queries as Q
from ptxcore.warehouse.ptxbench_import import (
    CATEGORY_STATUS,
    PTXBenchImportError,
    import_ptxbench_csv,
    run_name,
    variant_of,
)

from .conftest import EXCERPT_CSV

HEADER = ("model,arch,required_arch_tag,workload,workload_name,definition,exp_dir,trajectory_id,turn,"
          "reasoning_tokens,reasoning_token_source,correctness,speedup,arch_tag,correct_with_arch,performance_score")


def _csv(tmp_path, *rows: str):
    p = tmp_path / "in.csv"
    p.write_text("\n".join((HEADER, *rows)) + "\n")
    return str(p)


ROW = "M,hopper,H,w-1,gemm_M8192,gemm,/x/runs/my-run/,exp_{t:03d},{n},{rt},src,{c},{s},{tag},{cwa},{s}"


def test_mapping_of_one_run(tmp_path, wh):
    path = _csv(tmp_path,
                ROW.format(t=5, n=0, rt=10, c="Compilation error", s=0.0, tag="", cwa=0),
                ROW.format(t=5, n=1, rt=20, c="Correct", s=0.5, tag='"A, H"', cwa=1),
                ROW.format(t=5, n=2, rt=30, c="Correct", s=0.7, tag="A", cwa=0),
                ROW.format(t=5, n=3, rt=40, c="Profiling Service Timeout", s=0.0, tag="", cwa=0))
    assert import_ptxbench_csv(wh, path) == {"runs": 1, "trajectories": 1, "turns": 4}
    turns = wh.turns("my-run")
    assert [t.status for t in turns] == [EvaluationStatus.COMPILE_ERROR, EvaluationStatus.PASSED,
                                        EvaluationStatus.PASSED, EvaluationStatus.INFRA_ERROR]
    assert [t.target_instruction for t in turns] == [TargetInstruction.UNKNOWN, TargetInstruction.EXECUTED,
                                                    TargetInstruction.NOT_EXECUTED, TargetInstruction.UNKNOWN]
    assert [t.speedup for t in turns] == [None, 0.5, 0.7, None]
    assert [t.usage.reasoning_tokens for t in turns] == [10, 20, 30, 40]
    assert {t.prompt_variant for t in turns} == {"p1"}  # exp_005 // 4
    (traj,) = wh.trajectories("my-run")
    assert (traj.index, traj.num_turns, traj.max_turns, traj.best_speedup, traj.stop_reason) == (
        1, 4, 4, 0.7, StopReason.MAX_TURNS)
    _, rows = wh.sql("SELECT arch_tag, correct_with_arch, correctness FROM ptxbench_source_turns ORDER BY turn")
    assert rows[1] == ("A, H", 1, "Correct") and rows[0][0] is None


def test_reimport_is_idempotent(excerpt_db, tmp_path):
    import shutil

    copy = tmp_path / "copy.duckdb"
    shutil.copy(excerpt_db, copy)
    with Warehouse(copy) as wh:
        before = wh.sql("SELECT count(*) FROM turns")[1]
        import_ptxbench_csv(wh, str(EXCERPT_CSV))
        assert wh.sql("SELECT count(*) FROM turns")[1] == before == [(1023,)]
        assert wh.sql("SELECT count(*) FROM trajectories")[1] == [(128,)]
        assert wh.sql("SELECT count(*) FROM campaigns")[1] == [(10,)]


def test_every_category_is_mapped(excerpt_db):
    with Warehouse(excerpt_db, read_only=True) as wh:
        _, rows = wh.sql("SELECT DISTINCT s.correctness, t.status FROM ptxbench_source_turns s "
                         "JOIN turns t USING (campaign_id, trajectory_id, turn)")
    assert {(c, EvaluationStatus(s)) for c, s in rows} <= set(CATEGORY_STATUS.items())
    assert {c for c, _ in rows} == set(CATEGORY_STATUS)  # the excerpt holds every category


@pytest.mark.parametrize(("row", "message"), [
    (ROW.format(t=0, n=0, rt=1, c="Weird", s=0, tag="", cwa=0), r"in\.csv:2: unknown correctness category 'Weird'"),
    (ROW.format(t=0, n="x", rt=1, c="Correct", s=0, tag="", cwa=0), r"in\.csv:2: bad turn 'x'"),
])
def test_bad_rows_name_file_and_line(tmp_path, wh, row, message):
    with pytest.raises(PTXBenchImportError, match=message):
        import_ptxbench_csv(wh, _csv(tmp_path, row))


def test_missing_column_is_named(tmp_path, wh):
    p = tmp_path / "bad.csv"
    p.write_text("model,arch\nM,hopper\n")
    with pytest.raises(PTXBenchImportError, match="missing columns required_arch_tag"):
        import_ptxbench_csv(wh, str(p))


def test_run_and_variant_names():
    assert run_name("/home/u/eval_runs/opus48-gemm") == "opus48-gemm" == run_name("/a/opus48-gemm/")
    assert variant_of("exp_000") == ("p0", 0) and variant_of("exp_011") == ("p2", 3)
    with pytest.raises(PTXBenchImportError):
        variant_of("exp_x")


# Cells of the Table 1 / Table 7 layouts computed from the published data (all ten runs are complete in
# the excerpt, so the cells equal those from the full file). Cross-checks against the authors' own
# published aggregates: at k = 1 the turn rate equals their trajectory rate (opus48-b200-gemm: 9 of 12
# correct, 3 of 12 with Blackwell instructions), and their best speedups for opus48-b200-gemm are
# 0.7818 / 1.0116 / 1.0116 at k = 1 / 4 / 8.
PINNED_TABLE1 = {
    ("blackwell", "Claude Opus 4.8", "gemm_n7168_k5120"): "target 25.0 / 64.6 / 80.2 (all 75.0 / 81.2 / 88.5)",
    ("blackwell", "Claude Opus 4.8", "mha_with_lse_d128_causal"): "target 0.0 / 16.7 / 32.3 (all 91.7 / 77.1 / 83.3)",
    ("blackwell", "Qwen3.6-27B", "gemm_n7168_k5120"): "target 0.0 / 0.0 / 0.0 (all 0.0 / 0.0 / 1.0)",
    ("hopper", "Claude Opus 4.8", "gemm_n7168_k5120"): "target 91.7 / 95.8 / 94.8 (all 91.7 / 95.8 / 94.8)",
    ("hopper", "GLM-5.2", "mha_bwd_d128"): "target 8.3 / 6.2 / 5.2 (all 8.3 / 18.8 / 16.7)",
}
PINNED_TABLE7 = {
    ("blackwell", "Claude Opus 4.8", "gemm_n7168_k5120"): "target 0.78 / 1.01 / 1.01 (all 0.78 / 1.01 / 1.01)",
    ("blackwell", "Claude Opus 4.8", "mha_with_lse_d128_causal"): "target n/a / 0.23 / 0.27 (all 0.04 / 0.23 / 0.27)",
    ("blackwell", "Gemini 3.1 Pro", "mha_with_lse_d128"): "target n/a / 0.28 / 0.28 (all n/a / 0.28 / 0.28)",
    ("hopper", "GLM-5.2", "mha_bwd_d128"): "target 0.32 / 0.44 / 0.44 (all 0.32 / 0.44 / 0.44)",
}
PINNED_RUNS = ["opus48-gemm", "opus48-b200-gemm", "opus48-b200-mha-d128-causal", "glm52-mha-bwd-d128",
               "gemini-31-pro-b200-mha-d128", "qwen36-b200-gemm"]


def _cells(tables):
    out = {}
    for t in tables:
        arch = t.key.rsplit("_", 1)[1]
        for row in t.rows:
            for definition, cell in zip(t.header[1:], row[1:], strict=True):
                if cell:
                    out[(arch, row[0], definition)] = cell
    return out


def _check_pinned(db):
    with Warehouse(db, read_only=True) as wh:
        metrics = M.turn_metrics(Q.turn_outcomes(wh, Q.select_runs(wh, PINNED_RUNS)))
    t1, t7 = _cells(correctness_tables(metrics)), _cells(speedup_tables(metrics))
    assert {k: t1[k] for k in PINNED_TABLE1} == PINNED_TABLE1
    assert {k: t7[k] for k in PINNED_TABLE7} == PINNED_TABLE7
    opus = {m.k: m for m in metrics if m.run == "opus48-b200-gemm"}
    assert (opus[1].turn_correct_rate, opus[1].target_turn_correct_rate) == (9 / 12, 3 / 12)
    assert [round(opus[k].best_speedup, 4) for k in (1, 4, 8)] == [0.7818, 1.0116, 1.0116]


def test_pinned_cells_on_excerpt(excerpt_db):
    _check_pinned(excerpt_db)


@pytest.mark.slow
def test_pinned_cells_on_full_published_data(full_db):
    _check_pinned(full_db)
    with Warehouse(full_db, read_only=True) as wh:
        assert wh.sql("SELECT count(*), count(DISTINCT campaign_id) FROM turns")[1] == [(13674, 105)]
        assert wh.sql("SELECT count(*) FROM turns WHERE status = 'PASSED'")[1] == [(1894,)]
        assert wh.sql("SELECT count(*) FROM turns WHERE target_instruction = 'executed'")[1] == [(1433,)]


# -- the shipped compressed copy (data/ptxbench/) and hostile compressed inputs ---------------------------------


def _cli(*args: str):
    from typer.testing import CliRunner

    from flows.cli.main import app

    return CliRunner().invoke(app, ["warehouse", "import-ptxbench", *args])


def _gz(tmp_path, name: str, data: bytes):
    p = tmp_path / name
    p.write_bytes(data)
    return str(p)


@pytest.mark.parametrize(("name", "make", "needle"), [
    ("plain.csv.gz", lambda: b"model,arch\nM,hopper\n", "not a gzip file"),
    ("cut.csv.gz", lambda: __import__("gzip").compress((HEADER + "\n" + "".join(ROW.format(
        t=0, n=n, rt=1, c="Correct", s=1.0, tag="H", cwa=1) + "\n" for n in range(50))).encode())[:-40],
     "compressed data ends early"),
    ("binary.csv.gz", lambda: __import__("gzip").compress(b"\xff\xfe\x00garbage" * 100), "not UTF-8 text"),
    ("empty.csv.gz", lambda: __import__("gzip").compress(b""), "missing columns"),
])
def test_a_bad_compressed_file_is_one_line_and_writes_no_warehouse(tmp_path, name, make, needle):
    db = tmp_path / "w.duckdb"
    r = _cli(_gz(tmp_path, name, make()), "--db", str(db))
    assert r.exit_code == 2, r.output
    lines = [ln for ln in r.output.splitlines() if ln.strip()]
    assert lines[-1].startswith("error: ") and name in lines[-1] and needle in lines[-1], r.output
    assert "Traceback" not in r.output
    assert not db.exists()  # refused before the warehouse was created


def test_a_bad_plain_csv_writes_no_warehouse_either(tmp_path):
    db = tmp_path / "w.duckdb"
    r = _cli(_csv(tmp_path, ROW.format(t=0, n="x", rt=1, c="Correct", s=0, tag="", cwa=0)), "--db", str(db))
    assert r.exit_code == 2 and "in.csv:2: bad turn 'x'" in r.output and not db.exists()


def test_the_shipped_copy_is_the_published_file():
    """data/ptxbench/ptxbench_per_turn.csv.gz decompresses to the authors' file (sha256 of data/ptxbench/README.md)."""
    import gzip
    import hashlib

    from .conftest import SHIPPED_GZ

    digest = hashlib.sha256(gzip.decompress(SHIPPED_GZ.read_bytes())).hexdigest()
    assert digest == "7345616b56f9a864aafeea5a56c9a3f81d4e5086ac8012d7ebb1857a9492e17a"
    assert digest in (SHIPPED_GZ.parent / "README.md").read_text()
    assert "Apache License" in (SHIPPED_GZ.parent / "LICENSE").read_text()
    assert "Copyright 2026 PTXBench contributors" in (SHIPPED_GZ.parent / "NOTICE").read_text()
