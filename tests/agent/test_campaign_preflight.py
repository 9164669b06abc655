"""Campaign files and run options are untrusted input: every bad one is one line naming it, a non-zero exit,
and nothing written (no warehouse, no runs/ folder, no MLflow store, no Prefect server started).

Hostile cases first; the grid is sized by arithmetic, so a huge grid is refused at once.
"""

from __future__ import annotations

import time

import pytest
from typer.testing import CliRunner

from flows.cli.main import app
from ptxcore.agent import CampaignConfigError, load_campaign, parse_campaign, plan_campaign
from ptxcore.agent.preflight import preflight

runner = CliRunner()

BASE = """\
name: pf
models:
  - model: {model}
{extra}architectures: [hopper]
problems: [gemm_n7168_k5120]
prompt_variants: [hopper-pack]
trajectories: 1
turns: 1
"""


def campaign_file(tmp_path, model="replay/scripted", extra="", name="c.yaml"):
    path = tmp_path / name
    path.write_text(BASE.format(model=model, extra=extra))
    return path


@pytest.fixture
def sandbox(tmp_path, monkeypatch):
    """cwd, MLflow store and Prefect home inside tmp_path, so that 'nothing written' can be checked."""
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    monkeypatch.setenv("PTXBENCH_MLRUNS", str(work / "mlruns"))
    monkeypatch.setenv("PREFECT_HOME", str(tmp_path / "prefect-home"))  # Prefect makes it on import
    for name in ("PREFECT_LOGGING_LEVEL", "PREFECT_SERVER_LOGGING_LEVEL", "PREFECT_SERVER_ANALYTICS_ENABLED",
                 "PREFECT_SERVER_TASKS_TAG_CONCURRENCY_SLOT_WAIT_SECONDS"):
        monkeypatch.setenv(name, "WARNING" if "LOGGING" in name else "1")  # restored after the test
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    return work


def one_line(r, code: int = 2) -> str:
    assert r.exit_code == code, r.output
    assert "Traceback" not in r.output
    lines = [x for x in r.stderr.strip().splitlines() if x]
    assert len(lines) == 1 and lines[0].startswith("error: "), r.stderr
    return lines[0]


def run_refused(sandbox, *args) -> str:
    line = one_line(runner.invoke(app, ["campaign", "run", *args]))
    assert list(sandbox.iterdir()) == [], "a refused run wrote something"
    return line


# -- the grid ---------------------------------------------------------------------------------------------
def test_a_billion_trajectories_is_one_line_at_once(tmp_path, sandbox):
    path = campaign_file(tmp_path, extra="").read_text().replace("trajectories: 1", "trajectories: 1000000000")
    (tmp_path / "huge.yaml").write_text(path)
    t0 = time.monotonic()
    line = one_line(runner.invoke(app, ["campaign", "validate", str(tmp_path / "huge.yaml")]))
    assert time.monotonic() - t0 < 10
    assert line == f"error: {tmp_path / 'huge.yaml'}:7: trajectories: Input should be less than or equal to 100000"
    assert "trajectories" in run_refused(sandbox, str(tmp_path / "huge.yaml"))


def test_a_grid_product_over_the_bound_is_refused_without_expanding_it():
    models = "".join(f"  - {{model: replay/scripted, label: m{i}}}\n" for i in range(2000))
    text = BASE.format(model="replay/scripted\n    label: m-first", extra="").replace(
        "models:\n", "models:\n" + models, 1).replace("trajectories: 1", "trajectories: 100000")
    config = parse_campaign(text, where="big.yaml")
    t0 = time.process_time()  # this process's CPU: parallel workers cannot inflate it, as they do wall time
    with pytest.raises(CampaignConfigError, match=r"= 200,100,000 trajectories, more than the 100,000"):
        plan_campaign(config)  # expanding 2e8 plans would take minutes and gigabytes
    with pytest.raises(CampaignConfigError, match="more than the 100,000"):
        preflight(config)
    assert time.process_time() - t0 < 5


# -- models, providers, replay libraries, keys --------------------------------------------------------------
BAD_FILES = [
    ("nosuchprovider/some-model", "", ":3: models.0.model: 'nosuchprovider/some-model': litellm knows no such provider"),
    ("gpt-9", "", ":3: models.0.model: 'gpt-9': litellm knows no such provider"),
    ("anthropc/claude-opus-4-8", "", "did you mean 'anthropic'?"),
    ("replay/nope", "", ":3: models.0.model: no replay library at"),
    ("replay/../../etc", "", ":3: models.0.model: 'replay/../../etc': replay/<library>, a folder name"),
    ("replay/warehouse:../x", "", "replay/warehouse:<campaign id>"),
    ("'bad model; rm -rf /'", "", "is not a model string"),
    ("openai/gpt-4o", "    api_key_env: 'A B'\n", "models.0.api_key_env: 'A B' is not an environment variable name"),
    ("openai/gpt-4o", "    api_base: localhost:3000\n", "models.0.api_base: 'localhost:3000': expected an http(s) URL"),
]


@pytest.mark.parametrize(("model", "extra", "needle"), BAD_FILES, ids=[m for m, _, _ in BAD_FILES])
def test_bad_models_are_one_line_naming_the_key(tmp_path, sandbox, model, extra, needle):
    text = BASE.format(model=model, extra="").replace("architectures:", extra + "architectures:")
    path = tmp_path / "c.yaml"
    path.write_text(text)
    assert needle in one_line(runner.invoke(app, ["campaign", "validate", str(path)]))
    assert needle in run_refused(sandbox, str(path))


def test_an_unset_api_key_variable_warns_in_validate_and_refuses_run(tmp_path, sandbox):
    path = tmp_path / "c.yaml"
    path.write_text(BASE.format(model="openai/gpt-4o", extra="").replace(
        "architectures:", "    api_key_env: OPENAI_API_KEY\narchitectures:"))
    r = runner.invoke(app, ["campaign", "validate", str(path)])
    assert r.exit_code == 0, r.output
    assert "= 1 trajectories, at most 1 turns" in r.stdout
    assert "warning: models.0.api_key_env: environment variable OPENAI_API_KEY is not set" in r.stderr
    line = run_refused(sandbox, str(path))
    assert line == f"error: {path}:4: models.0.api_key_env: environment variable OPENAI_API_KEY is not set"


def test_a_replay_library_without_the_problem_is_a_warning(tmp_path):
    config, text = load_campaign(campaign_file(tmp_path).__str__())
    config = config.model_copy(update={"problems": ["mha_bwd_d128"]})
    report = preflight(config)
    assert report.warnings == ["models.0.model: replay library scripted has no script for mha_bwd_d128 "
                               "(those trajectories will fail)"]


def test_an_unmapped_model_is_a_warning_not_an_error(tmp_path):
    config = parse_campaign(BASE.format(model="openai/no-such-model-xyz", extra="").replace(
        "architectures:", "    api_base: http://127.0.0.1:9/v1\narchitectures:"))
    report = preflight(config, env={"PTXBENCH_ALLOWED_ENDPOINTS": "http://127.0.0.1:9"})  # allowed outside the file
    assert report.warnings == ["models.0: openai/no-such-model-xyz is not in litellm's model map: no context window "
                               "or price is known (set context_window_tokens)"]


def test_a_warehouse_replay_without_a_warehouse_is_refused_before_anything_is_written(tmp_path, sandbox):
    line = run_refused(sandbox, str(campaign_file(tmp_path, model="replay/warehouse:earlier")))
    assert "models.0.model: replay/warehouse:earlier: no warehouse at" in line


# -- the YAML itself ---------------------------------------------------------------------------------------
def test_a_yaml_alias_bomb_is_refused_at_once(tmp_path, sandbox):
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [{', '.join(f'*a{i - 1}' for _ in range(10))}]" for i in range(1, 9)]
    bomb = tmp_path / "bomb.yaml"
    bomb.write_text("\n".join(lines) + "\nname: pf\nmodels: [{model: replay/scripted}]\ndescription: *a8\n")
    t0 = time.monotonic()
    line = one_line(runner.invoke(app, ["campaign", "validate", str(bomb)]))
    assert time.monotonic() - t0 < 10 and "more than 100000 values once YAML aliases are expanded" in line
    assert "aliases" in run_refused(sandbox, str(bomb))


@pytest.mark.parametrize(("content", "needle"), [
    ("name: pf\nmodels: [{model: replay/scripted}]\ndescription: " + "[" * 5000 + "]" * 5000 + "\n", "nested too deeply"),
    ("name: pf\ndescription: '" + "x" * (1 << 20) + "'\n", "larger than 1048576 bytes"),
    (b"name: \xff\xfe\n", "not UTF-8 text"),
    ("- just\n- a list\n", "(top level): Input should be a valid dictionary"),
    ("name: a\n---\nname: b\n", "invalid YAML"),
])
def test_hostile_yaml_is_one_line(tmp_path, sandbox, content, needle):
    path = tmp_path / "h.yaml"
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    assert needle in one_line(runner.invoke(app, ["campaign", "validate", str(path)]))
    assert needle in run_refused(sandbox, str(path))


# -- command-line overrides and ids ------------------------------------------------------------------------
@pytest.mark.parametrize(("args", "needle"), [
    (["--campaign-id", "../../etc"], "error: --campaign-id '../../etc': use letters, digits"),
    (["--campaign-id", ""], "error: --campaign-id '': use letters, digits"),
    (["--campaign-id", "a/b"], "error: --campaign-id 'a/b'"),
    (["--campaign-id", "x" * 200], "error: --campaign-id 'xxxx"),
    (["--profiler", "b300=http://h:1"], "unknown architecture 'b300'"),
])
def test_bad_run_options_are_one_line_and_write_nothing(tmp_path, sandbox, args, needle):
    assert needle in run_refused(sandbox, str(campaign_file(tmp_path)), *args)


def test_campaign_status_refuses_an_id_that_is_a_path(sandbox):
    assert "campaign id '../../etc'" in one_line(runner.invoke(app, ["campaign", "status", "../../etc"]))
