"""benchmarks/env_steps.py end to end on this machine: the profiling service with its FakeRunner (no GPU), the
environments' real CPU stages, the asyncio pool; the table it prints has a row per concurrency."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_env_steps_benchmark_prints_a_row_per_concurrency(tmp_path, compile_cache_dir):
    env = {**os.environ, "PTXBENCH_CACHE_DIR": str(compile_cache_dir),
           "PTXBENCH_PROFILER_TOKEN_DIR": str(tmp_path / "tokens")}
    out = tmp_path / "env_steps.json"
    proc = subprocess.run([sys.executable, "benchmarks/env_steps.py", "--fake", "--concurrency", "1,2",
                           "--window-s", "2", "--warmup-s", "1", "--out", str(out)], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    rows = [line.split() for line in proc.stdout.splitlines() if line[:1].isdigit()]
    assert [r[0] for r in rows] == ["1", "2"] and all(int(r[1]) > 0 for r in rows)
    assert "NOT GPU measurements" in proc.stdout and out.exists()


def test_the_service_judges_under_the_profile():
    """The runner arguments the benchmark gives the service are the JudgeRunner's, with the profile's knobs."""
    import importlib.util
    import inspect

    from ptxcore.gpu.config import JudgeConfig
    from ptxcore.gpu.service.judge_runner import JudgeRunner
    from ptxcore.gym import PROFILES

    sys.path.insert(0, str(REPO / "benchmarks"))
    spec = importlib.util.spec_from_file_location("env_steps_bench", REPO / "benchmarks" / "env_steps.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    for profile in PROFILES.values():
        args = module.service_runner_args(profile)
        assert set(args) <= set(inspect.signature(JudgeRunner.__init__).parameters)
        config = JudgeConfig(**args["judge_config"])
        assert config == profile.judge_config()
