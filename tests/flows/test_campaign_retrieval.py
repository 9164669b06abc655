"""A campaign under a repair-retrieval condition: failing turns get notes, every turn records the condition."""

from __future__ import annotations

import re

import pytest
import yaml

from flows.campaign import campaign_flow
from ptxcore.adapt.retrieval import note_rows, write_notes_file
from ptxcore.schema import AugmentationStatus, EvaluationStatus, RetrievalCondition
from ptxcore.warehouse import Warehouse
from tests.adapt.notes_data import note, record

from .conftest import write_config

FAKE = "tests.flows.fakes:fake_judge"


def _scripted_kernel(repo_root) -> str:
    script = yaml.safe_load((repo_root / "replay" / "scripted" / "mha_with_lse_d128.yaml").read_text())
    return re.search(r"```cpp\n(.*?)```", script["turns"][0]["response"], re.DOTALL).group(1)


def _corpus(repo_root):
    wrong = _scripted_kernel(repo_root)
    return [record("h1", "mha_with_lse_d128", wrong, wrong.replace("0.f", "1.f"),
                   [note("softmax row max before exp", do_not_do=["write zeros to O"])], speedup=0.3)]


@pytest.mark.slow
def test_notes_condition_end_to_end(flow_env, repo_root):
    tmp = flow_env["tmp"]
    write_notes_file(_corpus(repo_root), tmp / "notes.jsonl")
    cfg = write_config(tmp / "notes.yaml", "retrieval-notes", problems="[mha_with_lse_d128, gemm_n7168_k5120]")
    cfg.write_text(cfg.read_text() + "repair_retrieval:\n  mode: notes\n  notes: notes.jsonl\n")
    summary = campaign_flow(config_path=str(cfg), warehouse=str(tmp / "wh.duckdb"),
                            mlflow_tracking_uri=flow_env["mlflow_uri"], judge_plugin=FAKE)
    assert summary.errors == []
    with Warehouse(summary.warehouse, read_only=True) as wh:
        turns = wh.turns("retrieval-notes")
        _, rows = wh.sql("SELECT problem, a.turn, condition, a.status, n_notes, source FROM turn_augmentations a "
                         "JOIN turns USING (campaign_id, trajectory_id, turn) ORDER BY problem, a.turn")
    mha = [t for t in turns if t.problem == "mha_with_lse_d128"]
    assert all(t.status is EvaluationStatus.INCORRECT_NUMERICAL for t in mha)
    assert all("## Repair notes from similar earlier wrong kernels" in t.feedback and
               "softmax row max before exp" in t.feedback for t in mha)
    assert all(t.augmentation.condition is RetrievalCondition.NOTES for t in turns) and len(rows) == len(turns)
    gemm = {t.turn: t.augmentation.status for t in turns if t.problem == "gemm_n7168_k5120"}
    # extraction error (no kernel), then a compile error and a wrong kernel: no gemm notes exist -> no match
    assert gemm == {0: AugmentationStatus.NO_KERNEL, 1: AugmentationStatus.NO_MATCH, 2: AugmentationStatus.NO_MATCH}
    assert {r[2:] for r in rows if r[0] == "mha_with_lse_d128"} == {("notes", "appended", 1, "notes.jsonl")}


def test_oracle_condition_from_a_warehouse_collection(flow_env, repo_root):
    tmp = flow_env["tmp"]
    with Warehouse(tmp / "wh.duckdb") as wh:
        wh.upsert_rows("repair_notes", note_rows("mha", _corpus(repo_root)))
    cfg = write_config(tmp / "oracle.yaml", "retrieval-oracle", problems="[mha_with_lse_d128]", turns=2)
    cfg.write_text(cfg.read_text() + "repair_retrieval:\n  mode: notes+fixed\n  notes: 'warehouse:mha'\n")
    summary = campaign_flow(config_path=str(cfg), warehouse=str(tmp / "wh.duckdb"),
                            mlflow_tracking_uri=flow_env["mlflow_uri"], judge_plugin=FAKE)
    with Warehouse(summary.warehouse, read_only=True) as wh:
        turns = wh.turns("retrieval-oracle")
    assert len(turns) == 2 and all(t.augmentation.oracle for t in turns)
    assert all("Verified fixed kernel:" in t.feedback and "1.f" in t.feedback for t in turns)
