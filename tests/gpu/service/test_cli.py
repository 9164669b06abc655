"""`ptxbench profiler serve|health`: one-line errors, refusal of an exposed bind, a real run."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import httpx
from typer.testing import CliRunner

from flows.cli.main import app

from .conftest import wait_for

REPO = Path(__file__).resolve().parents[3]


def run(*args: str, env: dict | None = None):
    return CliRunner().invoke(app, list(args), env=env)


def test_refuses_exposed_bind_without_token(tmp_path):
    r = run("profiler", "serve", "--gpus", "0", "--host", "0.0.0.0", "--work-dir", str(tmp_path),
            env={"PTXBENCH_PROFILER_TOKEN": ""})
    assert r.exit_code == 2 and "requires a shared token" in r.output and "Traceback" not in r.output
    assert len(r.output.strip().splitlines()) == 1


def test_bad_options_are_one_line_errors(tmp_path):
    for args, text in ((["--gpus", "0,x"], "not a GPU index"), (["--gpus", "0,0"], "distinct"),
                       (["--gpus", "0", "--runner-args", "{"], "not JSON"),
                       (["--gpus", "0", "--token-file", str(tmp_path / "none")], "--token-file: no such file"),
                       (["--gpus", "0", "--prebuild-workers", "-1"], "prebuild_workers"),
                       (["--gpus", "0", "--runner-args", '{"warm": "everything"}'], "warm must be 'auto'"),
                       (["--gpus", "0", "--runner-args", '{"warm": ["no_such_problem"]}'], "runner_args.warm"),
                       (["--gpus", "0", "--runner-args", '{"warm": 3}'], "runner_args.warm must be")):
        r = run("profiler", "serve", *args, "--work-dir", str(tmp_path / "wd"))
        assert r.exit_code == 2 and text in r.output and "Traceback" not in r.output, r.output
        assert len(r.output.strip().splitlines()) == 1 and not (tmp_path / "wd").exists(), r.output


def test_health_of_an_absent_server():
    r = run("profiler", "health", "--server", "http://127.0.0.1:9")
    assert r.exit_code == 2 and "http://127.0.0.1:9" in r.output


def test_serve_with_a_token_file_on_a_free_port(tmp_path):
    token = tmp_path / "token"
    token.write_text("0123456789abcdef-token\n")
    proc = subprocess.Popen([sys.executable, "-c", "from flows.cli.main import app; app()", "profiler", "serve",
                             "--gpus", "0", "--port", "0", "--fake", "--token-file", str(token),
                             "--work-dir", str(tmp_path / "wd"), "--log-level", "warning"],
                            cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        info = tmp_path / "wd" / "server.json"
        wait_for(info.exists, 60, "server.json")
        url = json.loads(info.read_text())["url"]
        headers = {"Authorization": "Bearer 0123456789abcdef-token"}
        wait_for(lambda: httpx.get(f"{url}/health", headers=headers).json()["status"] == "ok", 60, "ready")
        assert httpx.get(f"{url}/health").status_code == 401
    finally:
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    assert proc.returncode in (0, 130), err  # 130: uvicorn re-raises the SIGINT after a clean shutdown
    assert "FAKE runner" in err and "Traceback" not in err


def test_eval_through_a_server(tmp_path, start_service):
    svc = start_service(gpus=(0,))
    good, wrong = tmp_path / "good.cu", tmp_path / "wrong.cu"
    good.write_text("// fine\n")
    wrong.write_text("// FAKE:wrong\n")
    r = run("eval", str(good), "--problem", "gemm_n7168_k5120", "--server", svc.url, "--json")
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["status"] == "PASSED"
    r = run("eval", str(wrong), "--problem", "gemm_n7168_k5120", "--server", svc.url)
    assert r.exit_code == 1 and "INCORRECT_NUMERICAL" in r.output
    r = run("eval", str(good), "--problem", "gemm_n7168_k5120", "--server", "http://127.0.0.1:9")
    assert r.exit_code == 4 and "profiling service" in r.output and "Traceback" not in r.output
