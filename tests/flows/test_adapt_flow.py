"""The adapt build as Prefect flows: a source campaign (scripted replay, fake judge) -> ptxbench adapt's flow
with a replay teacher through the campaign machinery -> Parquet; a rerun repeats no model call."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from flows.adapt import adapt_build_flow
from flows.campaign import campaign_flow
from ptxcore.adapt.store import AdaptStore
from ptxcore.agent.replay import ReplayLibrary, load_library, register_source
from ptxcore.warehouse import Warehouse

from .adapt_fakes import MARKER
from .conftest import write_config

PLUGIN = "tests.flows.adapt_fakes:adapt_judge"
RECIPE = """\
name: flow-fixit
template: fixit
selection:
  source_campaigns: [adapt-src]
  problems: [mha_with_lse_d128]
  prompt_variants: [hopper-pack]
  per_problem_cap: null
  balance: none
teacher:
  model: {model: replay/adapt-test-teacher}
  turns: 2
  concurrency: {trajectories: 2, compile: 2, gpu_slots: {hopper: 1}}
synthesizer:
  model: {model: replay/adapt-synth-fixit}
  min_reasoning_chars: 200  # the scripted monologues are shorter than the authors' Fixit 2,000
export:
  tokenizer: tiktoken:o200k_base
"""


def _teacher(tmp_path) -> None:
    """A replay teacher that answers the scripted (quick-compiling) kernel, marked correct for the fake judge."""
    base = load_library("scripted").response("mha_with_lse_d128", "hopper", "", 0, 0).response
    fixed = base.replace("```cpp\n", f"```cpp\n// {MARKER}\n", 1)
    root = tmp_path / "adapt-test-teacher"
    root.mkdir()
    (root / "mha_with_lse_d128.yaml").write_text(yaml.safe_dump(
        {"problem": "mha_with_lse_d128", "arch": "hopper", "turns": [{"response": fixed}]}))
    register_source("adapt-test-teacher", ReplayLibrary(root))


@pytest.mark.slow
def test_adapt_build_flow_end_to_end_then_resume(flow_env, tmp_path):
    wh_path = tmp_path / "wh.duckdb"
    cfg = write_config(tmp_path / "src.yaml", "adapt-src", turns=2, problems="[mha_with_lse_d128]")
    source = campaign_flow(config_path=str(cfg), warehouse=str(wh_path), mlflow_tracking_uri=flow_env["mlflow_uri"],
                           judge_plugin=PLUGIN)
    assert source.turns_recorded == 2 and source.errors == []
    _teacher(tmp_path)
    recipe = tmp_path / "flow-fixit.yaml"
    recipe.write_text(RECIPE)
    run = lambda: adapt_build_flow(recipe_path=str(recipe), warehouse=str(wh_path), out_dir=str(tmp_path / "out"),  # noqa: E731
                                   mlflow_tracking_uri=flow_env["mlflow_uri"], judge_plugin=PLUGIN)
    first = run()
    assert first.steps == ["select", "repair", "pairs", "reason", "export"]
    assert first.selection.selected == 2 and first.repair.trajectories_planned == 2
    assert first.repair.turns_this_run == 2 and first.repair.judges == {"hopper": "adapt-fake"}
    assert first.pairs.pairs == 2 and first.reason.calls == 2 and first.export.rows == 2
    with Warehouse(wh_path, read_only=True) as wh:
        repair_turns = wh.turns("flow-fixit-repair")
        assert [t.status.value for t in repair_turns] == ["PASSED", "PASSED"]
        assert all(t.target_instruction.value == "executed" for t in repair_turns)
        assert {r.stop_reason for r in AdaptStore(wh, "flow-fixit").repairs()} == {"target_reached"}
    again = run()
    assert again.repair.turns_this_run == 0 and again.reason.calls == 0
    assert again.export.parquet_sha256 == first.export.parquet_sha256
    manifest = json.loads(open(first.export.manifest).read())
    assert manifest["inputs"]["campaigns"].keys() == {"adapt-src", "flow-fixit-repair"}
    check = subprocess.run([sys.executable, "benchmarks/device/adapt_check.py", "--warehouse", str(wh_path),
                            first.export.parquet], capture_output=True, text=True, timeout=300,
                           cwd=Path(__file__).resolve().parents[2])
    assert check.returncode == 0 and check.stdout.rstrip().endswith("OK"), check.stdout + check.stderr
    assert "flow-fixit.parquet: 2 rows (datasets) / 2 (pyarrow)" in check.stdout
