"""The CPU half of tests/gpu/test_env_hostile_gpu.py, everywhere: each hostile control through `step` (route none)
gets what `ptxbench eval` gives it on a machine without a GPU (the CPU stages), and the penalty where REJECTED."""

from __future__ import annotations

from pathlib import Path

import pytest

from ptxcore.arch import get_architecture
from ptxcore.gym import DEFAULT_REWARD, EnvSpec, RewardBasis, make_env
from ptxcore.judge import cpu_stages
from ptxcore.problems import get_problem
from ptxcore.schema import EvaluationStatus as S

HOSTILE = Path(__file__).resolve().parents[1] / "fixtures" / "hostile"


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(p.name for p in HOSTILE.glob("h*.cu")))
def test_hostile_control_through_step_matches_the_cpu_stages(name, compile_cache_dir, monkeypatch):
    monkeypatch.setenv("PTXBENCH_CACHE_DIR", str(compile_cache_dir))
    source = (HOSTILE / name).read_text().replace("@@PORT@@", "9")
    direct = cpu_stages(source, get_problem("gemm_n7168_k5120"), get_architecture("hopper"))
    env = make_env(EnvSpec(run_id="cpu-hostile", problem="gemm_n7168_k5120", max_turns=1), route="none")
    env.reset()
    stepped = env.step(f"```cpp\n{source}\n```")
    assert stepped.info.status is direct.status
    if direct.status is S.REJECTED:
        assert stepped.reward == DEFAULT_REWARD.rejected
    elif direct.status is S.NOT_EVALUATED:
        assert stepped.info.reward.basis is RewardBasis.UNJUDGED and stepped.reward == DEFAULT_REWARD.compiled
    assert stepped.truncated
