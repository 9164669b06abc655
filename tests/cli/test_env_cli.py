"""`ptxbench env demo`: every bad option is one line naming it, exit 2, no traceback, nothing written (checked
before any episode starts); then a real demo episode (slow: sandboxed nvcc builds, recorded H200 verdicts)."""

from __future__ import annotations

import pytest

from tests.cli.test_input_files_hostile import invoke, one_line_error, write


@pytest.mark.parametrize("args, part", [
    (["--problems", "no_such_problem"], "--problems"),
    (["--problems", ","], "--problems"),
    (["--policy", "openai/gpt-x"], "--policy"),
    (["--run-id", "../escape"], "--run-id"),
    (["--run-id", "ok\n"], "--run-id"),
    (["--judge", "ftp://host"], "ftp://host"),
    (["--profile", "fastest"], "--profile"),
    (["--variant", "no-such-variant"], "no-such-variant"),
    (["--turns", "9"], "--turns"),
    (["--reward", "/no/such/reward.yaml"], "reward.yaml"),
])
def test_bad_demo_options_are_one_line(tmp_path, args, part):
    wh = tmp_path / "wh.duckdb"
    result = invoke("env", "demo", "--problems", "gemm_n7168_k5120", "--warehouse", str(wh), *args)
    if "--turns" in args:  # typer's own range check: exit 2, no traceback
        assert result.exit_code == 2 and "Traceback" not in result.output
    else:
        one_line_error(result, part)
    assert not wh.exists()


@pytest.mark.parametrize("text, field", [("gamma: 2\n", "gamma"), ("reward_hack: 1\n", "reward_hack"),
                                         ("correct: .nan\n", "correct"), ("a: [\n", "invalid YAML")])
def test_bad_reward_file_is_one_line_naming_it(tmp_path, text, field):
    path = write(tmp_path, "reward.yaml", text)
    wh = tmp_path / "wh.duckdb"
    line = one_line_error(invoke("env", "demo", "--problems", "gemm_n7168_k5120", "--reward", path,
                                 "--warehouse", str(wh)), "reward.yaml", field)
    assert line and not wh.exists()


@pytest.mark.slow
def test_demo_plays_recorded_episodes_and_prints_returns(tmp_path, monkeypatch, compile_cache_dir):
    monkeypatch.setenv("PTXBENCH_CACHE_DIR", str(compile_cache_dir))
    monkeypatch.setenv("PTXBENCH_FORCE_NO_GPU", "1")
    wh = tmp_path / "wh.duckdb"
    result = invoke("env", "demo", "--problems", "gemm_n7168_k5120", "--warehouse", str(wh),
                    "--mlflow-uri", f"sqlite:///{tmp_path / 'mlflow.db'}")
    assert result.exit_code == 0, result.output
    # 0 + 0.1 + 0.1 + (0.1 + 0.3) + (0.1 + 0.3 + 0.1 executed + 0.2 carries: the TMA + wgmma turn's recorded
    # H200 counts give work share 1.0) = 1.3; its 0.906x earns no speedup stage
    assert "return 1.300" in result.output and "COMPILE_ERROR RUNTIME_ERROR INCORRECT_NUMERICAL PASSED PASSED" in \
        result.output
    from ptxcore.warehouse import Warehouse

    with Warehouse(wh, read_only=True) as w:
        assert w.sql("SELECT count(*) FROM env_steps")[1] == [(5,)]
        assert w.sql("SELECT reward_target FROM env_steps ORDER BY turn")[1] == [(0.0,)] * 4 + [(pytest.approx(0.3),)]
        assert w.sql("SELECT count(*) FROM turns t JOIN evaluations e USING (campaign_id, trajectory_id, turn) "
                     "WHERE json_extract_string(e.raw_json, '$.recorded.gpu_name') = 'NVIDIA H200'")[1] == [(4,)]  # every compiled turn: an H200 judged it


@pytest.mark.parametrize("args, part", [
    (["--host", "0.0.0.0"], "shared token"),
    (["--token-file", "/no/such/token"], "/no/such/token"),
    (["--run-id", "a/b"], "--run-id"),
    (["--judge", "gopher://x"], "gopher://x"),
    (["--reward", "/no/such/reward.yaml"], "reward.yaml"),
])
def test_bad_serve_options_are_one_line(tmp_path, args, part):
    wh = tmp_path / "wh.duckdb"
    one_line_error(invoke("env", "serve", "--port", "0", "--warehouse", str(wh), *args), part)
    assert not wh.exists()


def test_short_shared_token_is_refused(tmp_path):
    token = write(tmp_path, "token", "short\n")
    wh = tmp_path / "wh.duckdb"
    one_line_error(invoke("env", "serve", "--port", "0", "--token-file", token, "--warehouse", str(wh)),
                   "16 characters")
    assert not wh.exists()


def test_rescore_sql_prints_the_statement_and_refuses_a_bad_spec(tmp_path):
    good = write(tmp_path, "reward.yaml", "correct: 1.0\ngamma: 0.5\n")
    result = invoke("env", "rescore-sql", "--reward", good)
    assert result.exit_code == 0 and result.output.startswith("SELECT ") and "pow(0.5, s.turn)" in result.output
    one_line_error(invoke("env", "rescore-sql", "--reward", write(tmp_path, "bad.yaml", "gamma: -1\n")), "gamma")


def test_serve_records_a_remote_episode_like_a_campaign(tmp_path, monkeypatch):
    """`ptxbench env serve` in its own process: a client finds the per-start token, plays a step, and the step is
    in the warehouse (turns and env_steps) once the server stops."""
    import os
    import re
    import signal
    import subprocess
    import sys
    import time

    from ptxcore.gym.http import EnvClient
    from ptxcore.warehouse import Warehouse

    wh = tmp_path / "wh.duckdb"
    monkeypatch.setenv("PTXBENCH_PROFILER_TOKEN_DIR", str(tmp_path / "tokens"))  # where both sides look
    env = {**os.environ, "PTXBENCH_FORCE_NO_GPU": "1"}
    proc = subprocess.Popen([sys.executable, "-c", "from flows.cli.main import app; app()", "env", "serve",
                             "--port", "0", "--judge", "none", "--run-id", "served", "--warehouse", str(wh),
                             "--mlflow-uri", f"sqlite:///{tmp_path / 'mlflow.db'}"],
                            env=env, stderr=subprocess.PIPE, text=True)
    try:
        url, deadline = None, time.monotonic() + 120
        while url is None and time.monotonic() < deadline:
            line = proc.stderr.readline()
            found = re.search(r"environments at (http://\S+)", line)
            url = found.group(1) if found else None
        assert url, "the server did not say where it listens"
        with EnvClient(url) as client:
            remote = client.create("gemm_n7168_k5120", max_turns=1, policy_model="remote/policy")
            remote.reset(seed=4)
            result = remote.step("no code block here")
        assert result.truncated and result.info.status.value == "EXTRACTION_ERROR"
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(60)
    with Warehouse(wh, read_only=True) as w:
        assert w.sql("SELECT policy_model, seed, source FROM env_steps")[1] == [("remote/policy", 4, "environment")]
        assert [t.model for t in w.turns("served")] == ["remote/policy"]
        assert [t.stop_reason.value for t in w.trajectories("served")] == ["max_turns"]
