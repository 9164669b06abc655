"""A campaign (or recipe) file alone cannot choose where this process sends a secret.

Hostile cases first: the file points `api_base` at a listener of its own and names the profiler token (or any
other variable) as its key; smuggles an address through `decoding`; names a profiling service or an MLflow server.
Each is refused with one line before anything is sent, and the listener sees no request. Then the allowed route:
the same local server, allowed outside the file (`--allow-endpoint` / $PTXBENCH_ALLOWED_ENDPOINTS), gets the
request with the provider key, as the README's SGLang/vLLM example needs."""

from __future__ import annotations

from pathlib import Path

import pytest
from fastapi import FastAPI, Request
from typer.testing import CliRunner

from flows.cli.main import app
from flows.replay import make_client
from ptxcore.agent import CallContext, CampaignConfigError, ModelSpec, parse_campaign
from ptxcore.agent.endpoints import ENDPOINTS_ENV, EndpointError, check_model_access, endpoint_allowed

from .servers import serving

REPO = Path(__file__).resolve().parents[2]
runner = CliRunner()
TOKEN = "profiler-token-0123456789abcdef"
KEY = "sk-provider-key-0123456789"


@pytest.fixture(scope="module")
def listener():
    """An OpenAI-compatible server that records every request's headers (the campaign file's 'own listener')."""
    api = FastAPI()
    seen: list[dict] = []

    @api.post("/v1/chat/completions")
    async def chat(request: Request):
        seen.append({"headers": dict(request.headers), "body": await request.json()})
        return {"id": "c", "object": "chat.completion", "created": 0, "model": "m",
                "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "ok"}}],
                "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}

    with serving(api) as base:
        yield f"{base}/v1", seen


@pytest.fixture
def secrets_env(monkeypatch):
    monkeypatch.setenv("PTXBENCH_PROFILER_TOKEN", TOKEN)
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.setenv("SGLANG_API_KEY", KEY)
    monkeypatch.setenv(ENDPOINTS_ENV, "")  # restored after the test (--allow-endpoint sets it in this process)


def campaign_file(tmp_path: Path, model_lines: str, extra: str = "") -> str:
    path = tmp_path / "c.yaml"
    path.write_text(f"name: t\nmodels:\n  - model: openai/qwen\n{model_lines}architectures: [hopper]\n"
                    f"problems: [gemm_n7168_k5120]\ntrajectories: 1\nturns: 1\n{extra}")
    return str(path)


def one_line_error(result, *parts: str) -> str:
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    lines = [ln for ln in result.output.splitlines() if ln.strip() and not ln.startswith("warning:")]
    assert len(lines) == 1 and lines[0].startswith("error: "), result.output
    for part in parts:
        assert part in lines[0], lines[0]
    assert TOKEN not in result.output and KEY not in result.output
    return lines[0]


def no_secret_reached(seen: list[dict]) -> None:
    assert all(TOKEN not in str(r) and KEY not in str(r) for r in seen), seen


# -- hostile ---------------------------------------------------------------------------------------------------

def test_the_profiler_token_is_never_a_model_key(tmp_path, listener, secrets_env):
    url, seen = listener
    before = len(seen)
    f = campaign_file(tmp_path, f"    api_base: {url}\n    api_key_env: PTXBENCH_PROFILER_TOKEN\n")
    for command in (("campaign", "validate", f), ("campaign", "run", f), ("campaign", "run", f, "--allow-endpoint", url)):
        one_line_error(runner.invoke(app, list(command)), "c.yaml:5: models.0.api_key_env: PTXBENCH_PROFILER_TOKEN",
                       "this project's own variables")
    assert len(seen) == before
    assert not (tmp_path / "runs").exists() and not Path("runs/t").exists()


@pytest.mark.parametrize("name", ["HOME", "AWS_SECRET_ACCESS_KEY", "ANTHROPIC_API_KEY", "GITHUB_TOKEN"])
def test_an_arbitrary_variable_is_not_a_key_of_the_provider(tmp_path, listener, secrets_env, monkeypatch, name):
    url, seen = listener
    monkeypatch.setenv(name, KEY)
    f = campaign_file(tmp_path, f"    api_base: {url}\n    api_key_env: {name}\n")
    line = one_line_error(runner.invoke(app, ["campaign", "run", f, "--allow-endpoint", url]),
                          f"models.0.api_key_env: {name} is not a key variable of provider 'openai'")
    assert "OPENAI_API_KEY" in line  # says what it accepts
    no_secret_reached(seen)


def test_an_api_base_the_user_did_not_allow_is_refused_before_any_request(tmp_path, listener, secrets_env):
    url, seen = listener
    before = len(seen)
    f = campaign_file(tmp_path, f"    api_base: {url}\n    api_key_env: OPENAI_API_KEY\n")
    one_line_error(runner.invoke(app, ["campaign", "run", f]), "c.yaml:4: models.0.api_base", "--allow-endpoint")
    g = campaign_file(tmp_path, f"    api_base: {url}\n")  # no key variable named: litellm would send OPENAI_API_KEY
    one_line_error(runner.invoke(app, ["campaign", "run", g]), "models.0.api_base")
    r = runner.invoke(app, ["campaign", "validate", f])  # validate: a warning, not an error
    assert r.exit_code == 0 and "warning: models.0.api_base" in r.output and "campaign run refuses it" in r.output
    assert len(seen) == before


@pytest.mark.parametrize("decoding", ["{api_base: URL}", "{base_url: URL}", "{api_key: x}",
                                      "{extra_headers: {Authorization: x}}", "{success_callback: [langfuse]}",
                                      "{custom_llm_provider: openai}", "{mock_response: hi}"])
def test_decoding_cannot_carry_an_address_a_key_or_a_callback(tmp_path, listener, secrets_env, decoding):
    url, seen = listener
    f = campaign_file(tmp_path, f"    decoding: {decoding.replace('URL', url)}\n")
    one_line_error(runner.invoke(app, ["campaign", "validate", f]), "models.0.decoding", "is not a decoding setting")
    no_secret_reached(seen)


def test_a_profiler_or_mlflow_address_in_the_file_must_be_allowed(tmp_path, secrets_env):
    replay = "name: t\nmodels:\n  - model: replay/demo\narchitectures: [hopper]\nproblems: [gemm_n7168_k5120]\n"
    (tmp_path / "p.yaml").write_text(replay + "profilers: {hopper: 'http://127.0.0.1:9/'}\n")
    one_line_error(runner.invoke(app, ["campaign", "run", str(tmp_path / "p.yaml")]),
                   "p.yaml:6: profilers.hopper: http://127.0.0.1:9", "profiler token")
    for uri in ("http://127.0.0.1:9/", "postgresql://attacker/db"):
        (tmp_path / "m.yaml").write_text(replay + f"mlflow_tracking_uri: '{uri}'\n")
        one_line_error(runner.invoke(app, ["campaign", "run", str(tmp_path / "m.yaml")]), "mlflow_tracking_uri")
    r = runner.invoke(app, ["campaign", "validate", str(tmp_path / "p.yaml")])
    assert r.exit_code == 0 and "warning: profilers.hopper" in r.output


def test_make_client_refuses_too(secrets_env, listener):
    """Where the key is read (a repair campaign or a synthesizer reaches this without the campaign preflight)."""
    url, seen = listener
    for spec, needle in ((ModelSpec(model="openai/q", api_base=url, api_key_env="OPENAI_API_KEY"), "api_base"),
                         (ModelSpec(model="openai/q", api_key_env="SGLANG_API_KEY"), "api_key_env")):
        with pytest.raises(CampaignConfigError, match=needle):
            make_client(spec, "teacher.model")
    with pytest.raises(ValueError, match="own variables"):
        ModelSpec(model="openai/q", api_key_env="PTXBENCH_ANYTHING")
    no_secret_reached(seen)


def test_a_recipe_alone_cannot_choose_the_synthesizers_server(tmp_path, listener, secrets_env):
    url, seen = listener
    recipe = (REPO / "campaigns" / "adapt" / "s6.yaml").read_text().replace("http://localhost:30002/v1", url)
    (tmp_path / "s6.yaml").write_text(recipe)
    r = runner.invoke(app, ["adapt", "build", str(tmp_path / "s6.yaml"), "--warehouse", str(tmp_path / "w.duckdb")])
    one_line_error(r, "synthesizer.model.api_base")
    assert not (tmp_path / "w.duckdb").exists()
    no_secret_reached(seen)


@pytest.mark.parametrize(("url", "ok"), [
    ("http://localhost:30002/v1", True), ("http://LOCALHOST:30002/v1/", True), ("http://localhost:30002/v1/chat", True),
    ("http://localhost:30002", False), ("http://localhost:30002.evil.com/v1", False),
    ("http://localhost:300021/v1", False), ("https://localhost:30002/v1", False),
    ("http://localhost:30002@evil.com/v1", False), ("http://evil.com/?x=http://localhost:30002/v1", False),
    ("http://localhost:30002/v10", False), ("http://localhost:30002/v1/../../x", False), ("ftp://localhost:30002/v1", False),
])
def test_allowed_addresses_match_scheme_host_port_and_path(url, ok):
    assert endpoint_allowed(url, ["http://localhost:30002/v1"]) is ok


def test_the_providers_own_base_needs_no_allowing():
    check_model_access("m", "openai", "https://api.openai.com/v1", "OPENAI_API_KEY", ())
    with pytest.raises(EndpointError, match="api_key_env"):  # a self-hosted key only with an allowed server
        check_model_access("m", "openai", "https://api.openai.com/v1", "SGLANG_API_KEY", ())


# -- allowed: the local SGLang / vLLM route keeps working with one extra step ----------------------------------

def test_an_allowed_local_server_gets_the_request_with_its_key(tmp_path, listener, secrets_env, monkeypatch):
    url, seen = listener
    f = campaign_file(tmp_path, f"    api_base: {url}\n    api_key_env: SGLANG_API_KEY\n    context_window_tokens: 8192\n")
    r = runner.invoke(app, ["campaign", "validate", f, "--allow-endpoint", url.removesuffix("/v1")])
    assert r.exit_code == 0 and "warning: models.0.api_base" not in r.output, r.output
    monkeypatch.setenv(ENDPOINTS_ENV, url)
    config = parse_campaign(Path(f).read_text())
    client = make_client(config.models[0], "models.0")
    reply = client.complete([{"role": "user", "content": "hi"}],
                            CallContext(problem="gemm_n7168_k5120", arch="hopper", prompt_variant="hopper-pack"))
    assert reply.text == "ok"
    assert seen[-1]["headers"]["authorization"] == f"Bearer {KEY}"
    assert TOKEN not in str(seen[-1])
