from __future__ import annotations

import json

from typer.testing import CliRunner

from flows.cli.main import app

runner = CliRunner()


def test_show_prints_system_and_user():
    res = runner.invoke(
        app, ["prompts", "show", "--arch", "h100", "--level", "params", "--problem", "gemm_n7168_k5120"]
    )
    assert res.exit_code == 0, res.output
    assert "===== system =====" in res.output and "# Hardware parameters" in res.output
    assert '"name": "gemm_n7168_k5120"' in res.output


def test_show_json_with_variant():
    res = runner.invoke(
        app, ["prompts", "show", "--variant", "blackwell-guided", "--problem", "mha_bwd_d128", "--json"]
    )
    assert res.exit_code == 0, res.output
    data = json.loads(res.output)
    assert data["variant"] == "blackwell-guided" and data["arch"] == "blackwell" and len(data["sha256"]) == 64


def test_tokens_json_reports_tokenizer_and_totals():
    res = runner.invoke(app, ["prompts", "tokens", "--json"])
    assert res.exit_code == 0, res.output
    data = json.loads(res.output)
    assert data["tokenizer"] == "tiktoken:o200k_base"
    assert [p["hardware"] for p in data["packs"]] == ["H100", "B200"]
    assert all(20_000 <= p["pack_total"] <= 32_000 for p in data["packs"])


def test_tokens_table_layout():
    res = runner.invoke(app, ["prompts", "tokens"])
    assert res.exit_code == 0, res.output
    for label in (
        "Parameters",
        "Template functions",
        "Contract",
        "Total (pack)",
        "H100",
        "B200",
        "o200k_base",
    ):
        assert label in res.output


def test_variants_json():
    res = runner.invoke(app, ["prompts", "variants", "--arch", "hopper", "--language", "cuda", "--json"])
    assert res.exit_code == 0, res.output
    names = {v["name"] for v in json.loads(res.output)}
    assert {"hopper-pack", "hopper-guided", "hopper-guided-ws"} <= names


def test_bad_inputs_are_one_line_errors():
    cases = [
        ["prompts", "show", "--arch", "hopper", "--level", "params+bogus", "--problem", "gemm_n7168_k5120"],
        ["prompts", "show", "--arch", "volta", "--problem", "gemm_n7168_k5120"],
        ["prompts", "show", "--arch", "hopper", "--problem", "no_such_problem"],
        ["prompts", "show", "--variant", "nope", "--problem", "gemm_n7168_k5120"],
        ["prompts", "show", "--problem", "gemm_n7168_k5120"],
        ["prompts", "tokens", "--language", "fortran"],
    ]
    for args in cases:
        res = runner.invoke(app, args)
        assert res.exit_code == 2, (args, res.output)
        assert res.output.strip().startswith("error:") and len(res.output.strip().splitlines()) == 1, (
            res.output
        )
        assert "Traceback" not in res.output
