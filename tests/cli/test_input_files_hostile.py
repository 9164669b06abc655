"""Every YAML/JSON/source file the command line reads is untrusted: a bad one is one line naming the file (and the
key or line where there is one), a non-zero exit, no traceback, and nothing created. The size is checked before
anything is read, so a huge file, a FIFO or a device never stalls or floods the process; ids are checked whole
(a `$` anchor lets a trailing newline through, and an id becomes a directory name)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from flows.cli.main import app

REPO = Path(__file__).resolve().parents[2]
runner = CliRunner()
CAMPAIGN = "name: t\nmodels:\n  - model: replay/demo\narchitectures: [hopper]\nproblems: [gemm_n7168_k5120]\n"


def one_line_error(result, *parts: str) -> str:
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    lines = [ln for ln in result.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), result.output
    for part in parts:
        assert part in lines[0], lines[0]
    return lines[0]


def invoke(*args: str):
    return runner.invoke(app, list(args))


def write(tmp_path: Path, name: str, text: str | bytes) -> str:
    path = tmp_path / name
    path.write_bytes(text.encode() if isinstance(text, str) else text)
    return str(path)


# -- campaign files ------------------------------------------------------------------------------------------

def test_a_5000_digit_number_is_one_line_with_its_line(tmp_path):
    f = write(tmp_path, "big.yaml", CAMPAIGN + "trajectories: " + "9" * 5000 + "\n")
    one_line_error(invoke("campaign", "validate", f), "big.yaml:6: invalid YAML: a number too long")
    one_line_error(invoke("campaign", "run", f), "big.yaml:6")
    assert not (tmp_path / "runs").exists() and not Path("runs/t").exists()


@pytest.mark.parametrize("value", ['"x\\n"', '"x\\r"', '"x/y"', '"../x"', '"a b"', '"x\\u202e"'])
def test_a_campaign_id_with_a_trailing_newline_or_separator_is_refused(tmp_path, value):
    f = write(tmp_path, "c.yaml", CAMPAIGN + f"campaign_id: {value}\n")
    one_line_error(invoke("campaign", "validate", f), "c.yaml:6: campaign_id: use letters")
    one_line_error(invoke("campaign", "run", f, "--turns", "1"), "campaign_id")


def test_ids_on_the_command_line_and_in_model_strings_are_checked_whole(tmp_path):
    f = write(tmp_path, "c.yaml", CAMPAIGN)
    one_line_error(invoke("campaign", "run", f, "--campaign-id", "x\n"), "--campaign-id")
    one_line_error(invoke("campaign", "status", "x\n"), "campaign id")
    for model in ('"replay/demo\\n"', '"replay/warehouse:x\\n"', '"openai/gpt-4o\\n"'):
        g = write(tmp_path, "m.yaml", CAMPAIGN.replace("model: replay/demo", f"model: {model}"))
        one_line_error(invoke("campaign", "validate", g), "models.0.model")
    h = write(tmp_path, "k.yaml", CAMPAIGN.replace("  - model: replay/demo\n",
                                                   '  - model: openai/gpt-4o\n    api_key_env: "OPENAI_API_KEY\\n"\n'))
    one_line_error(invoke("campaign", "validate", h), "models.0.api_key_env")
    b = write(tmp_path, "b.yaml", CAMPAIGN.replace("  - model: replay/demo\n",
                                                   '  - model: openai/gpt-4o\n    api_base: "http://x/v1\\n"\n'))
    one_line_error(invoke("campaign", "validate", b), "models.0.api_base")


def test_not_utf8_is_named(tmp_path):
    f = write(tmp_path, "latin1.yaml", CAMPAIGN.encode().replace(b"name: t", b"name: t\xe9"))
    one_line_error(invoke("campaign", "validate", f), "latin1.yaml: not UTF-8")


@pytest.mark.timeout(120)  # a FIFO opened for reading blocks: a regression must fail, not hang
def test_size_is_checked_before_reading(tmp_path):
    big = tmp_path / "big.yaml"
    with big.open("wb") as fh:  # a sparse 300 MB file: reading it whole would take seconds and 300 MB
        fh.truncate(300 << 20)
    one_line_error(invoke("campaign", "validate", str(big)), "big.yaml: larger than 1048576 bytes")
    fifo = tmp_path / "fifo.yaml"
    os.mkfifo(fifo)  # opening it for reading would block forever without a writer
    one_line_error(invoke("campaign", "validate", str(fifo)), "fifo.yaml: not a regular file")
    one_line_error(invoke("campaign", "validate", "/dev/zero"), "/dev/zero: not a regular file")


# -- recipes -------------------------------------------------------------------------------------------------

def recipe(tmp_path: Path, old: str, new: str, name: str = "r.yaml") -> str:
    text = (REPO / "campaigns" / "adapt" / "demo-kernelgen.yaml").read_text()
    assert old in text
    return write(tmp_path, name, text.replace(old, new, 1))


def test_a_recipe_name_with_a_newline_is_blamed_on_the_name_not_on_build_id(tmp_path):
    text = (REPO / "campaigns" / "adapt" / "demo-kernelgen.yaml").read_text()
    name_line = next(i for i, ln in enumerate(text.splitlines(), 1) if ln.startswith("name:"))
    old = text.splitlines()[name_line - 1]
    for bad in ('name: "kg\\n"', f"name: {'k' * 101}"):
        f = recipe(tmp_path, old, bad)
        for command in (("adapt", "validate", f), ("adapt", "build", f, "--warehouse", str(tmp_path / "w.duckdb"))):
            line = one_line_error(invoke(*command), f"r.yaml:{name_line}: name: use letters")
            assert "--build-id" not in line
    assert not (tmp_path / "w.duckdb").exists()
    f = recipe(tmp_path, old, "name: kg")
    one_line_error(invoke("adapt", "build", f, "--build-id", "x\n", "--warehouse", str(tmp_path / "w.duckdb")),
                   "--build-id 'x\\n'")


def test_a_huge_recipe_is_refused_before_it_is_read(tmp_path):
    big = tmp_path / "big.yaml"
    with big.open("wb") as fh:
        fh.truncate(300 << 20)
    one_line_error(invoke("adapt", "validate", str(big)), "big.yaml: larger than 1048576 bytes")
    one_line_error(invoke("adapt", "validate", write(tmp_path, "l.yaml", b"name: k\xe9\n")), "l.yaml: not UTF-8")
    f = recipe(tmp_path, "name:", "paper_rows: " + "1" * 5000 + "\nname:")
    one_line_error(invoke("adapt", "validate", f), "invalid YAML: a number too long")


# -- JSON inputs: notes files and recipe manifests --------------------------------------------------------------

def test_a_notes_file_with_a_huge_number_or_bad_bytes_is_one_line(tmp_path):
    notes = tmp_path / "notes.jsonl"
    notes.write_text('{"problem": ' + "1" * 5000 + "}\n")
    f = write(tmp_path, "c.yaml", CAMPAIGN + "repair_retrieval: {mode: notes, notes: notes.jsonl}\n")
    one_line_error(invoke("campaign", "validate", f), "notes.jsonl:1: invalid JSON: a number too long")
    notes.write_bytes(b'{"problem": "caf\xe9"}\n')
    one_line_error(invoke("campaign", "validate", f), "notes.jsonl: not UTF-8")


@pytest.mark.timeout(120)  # a FIFO opened for reading blocks: a regression must fail, not hang
def test_a_manifest_with_a_huge_number_or_bad_bytes_is_one_line(tmp_path):
    m = write(tmp_path, "m.json", '{"rows": ' + "1" * 5000 + "}")
    one_line_error(invoke("report", "recipes", m, "--out", str(tmp_path / "out")), "m.json: invalid JSON: a number")
    m = write(tmp_path, "m.json", b'{"rows": "\xff"}')
    one_line_error(invoke("report", "recipes", m, "--out", str(tmp_path / "out")), "m.json: not UTF-8")
    os.mkfifo(tmp_path / "p.json")
    one_line_error(invoke("report", "recipes", str(tmp_path / "p.json"), "--out", str(tmp_path / "out")),
                   "p.json: not a regular file")


# -- kernel sources --------------------------------------------------------------------------------------------

@pytest.mark.timeout(120)  # a FIFO opened for reading blocks: a regression must fail, not hang
def test_kernel_sources_are_bounded_and_named(tmp_path):
    os.mkfifo(tmp_path / "k.cu")
    one_line_error(invoke("compile", str(tmp_path / "k.cu"), "-p", "gemm_n7168_k5120"), "k.cu: not a regular file")
    big = tmp_path / "big.cu"
    with big.open("wb") as fh:
        fh.truncate(300 << 20)
    one_line_error(invoke("compile", str(big), "-p", "gemm_n7168_k5120"), "big.cu: larger than")
    one_line_error(invoke("compile", write(tmp_path, "l.cu", b"// \xff\n"), "-p", "gemm_n7168_k5120"),
                   "l.cu: not UTF-8")
