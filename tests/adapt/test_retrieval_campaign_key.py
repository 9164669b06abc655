"""The `repair_retrieval` campaign key and notes sources — hostile input first: bad modes, paths that escape,
malformed JSON, empty corpora; then the good paths (file, PTXBENCH_NOTES_DIRS, warehouse collection)."""

from __future__ import annotations

import os

import pytest
from typer.testing import CliRunner

from flows.cli.main import app
from ptxcore.adapt.retrieval import (
    NotesSourceError,
    build_augmenter,
    load_campaign_notes,
    note_rows,
    read_warehouse_notes,
    write_notes_file,
)
from ptxcore.agent import CampaignConfigError, parse_campaign
from ptxcore.schema import RetrievalCondition
from ptxcore.warehouse import Warehouse

from .notes_data import corpus

BASE = """\
name: t
models:
  - model: replay/scripted
architectures: [hopper]
problems: [mha_with_lse_d128]
prompt_variants: [hopper-pack]
trajectories: 1
turns: 2
"""


def config_error(block: str) -> str:
    with pytest.raises(CampaignConfigError) as info:
        parse_campaign(BASE + block, where="c.yaml")
    return str(info.value)


@pytest.mark.parametrize("block, expected", [
    ("repair_retrieval:\n  mode: oracle\n  notes: n.jsonl\n",
     "c.yaml:10: repair_retrieval.mode: Input should be 'none', 'notes' or 'notes+fixed'"),
    ("repair_retrieval:\n  mode: notes\n", "c.yaml:10: repair_retrieval: mode notes needs `notes`"),
    ("repair_retrieval:\n  mode: notes\n  notes: ../../etc/n.jsonl\n",
     "c.yaml:11: repair_retrieval.notes: ../../etc/n.jsonl: '..' is not allowed in the notes path"),
    ("repair_retrieval:\n  mode: notes\n  notes: notes.txt\n", "c.yaml:11: repair_retrieval.notes: notes.txt: the notes "
     "file must be a .jsonl file"),
    ("repair_retrieval:\n  mode: notes\n  notes: 'warehouse:../x'\n", "c.yaml:11: repair_retrieval.notes: warehouse:<collection> needs a collection id"),
    ("repair_retrieval:\n  mode: notes\n  notes: n.jsonl\n  max_notes: 0\n",
     "c.yaml:12: repair_retrieval.max_notes: Input should be greater than or equal to 1"),
    ("repair_retrieval:\n  mode: notes\n  notes: n.jsonl\n  top_k: 3\n", "c.yaml:12: repair_retrieval.top_k: unknown key"),
    ("repair_retrieval: notes\n", "c.yaml:9: repair_retrieval: Input should be a valid dictionary"),
])
def test_bad_keys_are_one_line_naming_key_and_line(block, expected):
    message = config_error(block)
    assert message.startswith(expected) and "\n" not in message


def test_good_key_parses():
    cfg = parse_campaign(BASE + "repair_retrieval:\n  mode: notes+fixed\n  notes: 'warehouse:mha-notes'\n")
    assert cfg.repair_retrieval.mode is RetrievalCondition.NOTES_FIXED
    assert cfg.repair_retrieval.warehouse_collection == "mha-notes" and cfg.repair_retrieval.top_k_groups == 3
    assert parse_campaign(BASE).repair_retrieval is None


def _spec(notes: str, mode: str = "notes"):
    return parse_campaign(BASE + f"repair_retrieval:\n  mode: {mode}\n  notes: '{notes}'\n").repair_retrieval


def test_notes_outside_the_allowed_directories_are_refused(tmp_path, monkeypatch):
    monkeypatch.delenv("PTXBENCH_NOTES_DIRS", raising=False)
    campaign_dir, outside = tmp_path / "campaigns", tmp_path / "elsewhere"
    campaign_dir.mkdir()
    outside.mkdir()
    write_notes_file(corpus(), outside / "n.jsonl")
    cfg_file = campaign_dir / "c.yaml"
    with pytest.raises(NotesSourceError, match="outside the allowed directories") as info:
        load_campaign_notes(_spec(str(outside / "n.jsonl")), cfg_file)
    assert "\n" not in str(info.value) and str(info.value).startswith("repair_retrieval.notes: ")
    (campaign_dir / "link.jsonl").symlink_to(outside / "n.jsonl")  # a symlink does not get out either
    with pytest.raises(NotesSourceError, match="outside the allowed"):
        load_campaign_notes(_spec("link.jsonl"), cfg_file)
    with pytest.raises(NotesSourceError, match="no such notes file"):
        load_campaign_notes(_spec("missing.jsonl"), cfg_file)
    monkeypatch.setenv("PTXBENCH_NOTES_DIRS", os.pathsep.join(["", str(outside)]))
    assert len(load_campaign_notes(_spec(str(outside / "n.jsonl")), cfg_file)) == 4
    assert len(load_campaign_notes(_spec("link.jsonl"), cfg_file)) == 4


@pytest.mark.parametrize("content, expected", [
    ('{"pair_id": "a"}\n{not json\n', "n.jsonl:1: problem: Field required"),
    ("\n\n{not json\n", "n.jsonl:3: invalid JSON: Expecting property name enclosed in double quotes (column 2)"),
    ("", "n.jsonl: no note records"),
    ("[1, 2]\n", "n.jsonl:1: (top level): Input should be a valid dictionary"),
    (b"\xff\xfe\x00".decode("latin-1"), "not UTF-8 text"),
])
def test_malformed_notes_files_are_one_line(tmp_path, content, expected):
    path = tmp_path / "n.jsonl"
    path.write_bytes(content.encode("latin-1") if "\xff" in content else content.encode())
    with pytest.raises(NotesSourceError) as info:
        load_campaign_notes(_spec("n.jsonl"), tmp_path / "c.yaml")
    message = str(info.value)
    assert "\n" not in message and expected.split(":")[-1].strip() in message
    if expected.startswith("n.jsonl:"):
        assert message.startswith(str(path) + expected.removeprefix("n.jsonl"))


def test_records_round_trip_through_a_file_and_the_warehouse(tmp_path):
    records = corpus()
    write_notes_file(records, tmp_path / "n.jsonl")
    assert load_campaign_notes(_spec("n.jsonl"), tmp_path / "c.yaml") == records
    assert load_campaign_notes(_spec("n.jsonl", "none"), tmp_path / "c.yaml") is None
    with Warehouse(tmp_path / "w.duckdb") as wh:
        wh.upsert_rows("repair_notes", note_rows("mha-notes", records))
        wh.upsert_rows("repair_notes", note_rows("mha-notes", records))  # idempotent
        back = read_warehouse_notes(wh, "mha-notes")
        assert sorted(back, key=lambda r: r.pair_id) == records
        assert wh.sql("SELECT count(*), sum(n_notes) FROM repair_notes")[1] == [(4, 8)]
        with pytest.raises(NotesSourceError, match="warehouse:other: no such notes collection"):
            read_warehouse_notes(wh, "other")
    with pytest.raises(NotesSourceError, match="no note records"):
        build_augmenter(_spec("n.jsonl"), [])
    assert build_augmenter(_spec("n.jsonl"), records).index is not None


def test_campaign_validate_reports_bad_notes_in_one_line(tmp_path):
    runner = CliRunner()
    good = tmp_path / "good.yaml"
    write_notes_file(corpus(), tmp_path / "n.jsonl")
    good.write_text(BASE + "repair_retrieval:\n  mode: notes\n  notes: n.jsonl\n")
    assert runner.invoke(app, ["campaign", "validate", str(good)]).exit_code == 0
    for notes, content, message in (("/etc/passwd.jsonl", None, "outside the allowed directories"),
                                    ("bad.jsonl", "{oops\n", "bad.jsonl:1: invalid JSON"),
                                    ("../x.jsonl", None, "'..' is not allowed")):
        if content is not None:
            (tmp_path / notes).write_text(content)
        cfg = tmp_path / "c.yaml"
        cfg.write_text(BASE + f"repair_retrieval:\n  mode: notes\n  notes: {notes}\n")
        r = runner.invoke(app, ["campaign", "validate", str(cfg)])
        assert r.exit_code == 2 and message in r.output and "Traceback" not in r.output
        assert len(r.output.strip().splitlines()) == 1
