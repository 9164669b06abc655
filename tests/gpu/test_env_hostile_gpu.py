"""The hostile controls through the training environment's `step` get the verdict the judge gives them directly
(`ptxbench eval`'s LocalGpuJudge), and the reward spec's penalty where that verdict is REJECTED or REWARD_HACK.

The step wraps each candidate in the answer a model would give (one ```cpp block), extracts it as the agent does,
runs the CPU stage, then the same judge with that build; the direct judgement builds for itself. Verdicts that
the hostile suite allows to vary between runs (a fork bomb's, a patched timer's, an early reply's) are compared as
the suite compares them.
"""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from ptxcore.arch import get_architecture
from ptxcore.gpu import JudgeConfig
from ptxcore.gym import DEFAULT_REWARD, EnvSpec, KernelEnv, spec_prompt
from ptxcore.gym.judging import JudgeEvaluator
from ptxcore.judge import LocalGpuJudge
from ptxcore.problems import get_problem
from ptxcore.schema import EvaluationStatus as S

pytestmark = pytest.mark.gpu

HOSTILE = Path(__file__).resolve().parents[1] / "fixtures" / "hostile"
CORRECT = Path(__file__).resolve().parents[2] / "solutions" / "gemm_n7168_k5120" / "wgmma_tma_ws.cu"
CONFIG = dict(trials=3, warmup=1, iters=3, call_timeout_s=20.0, throttle_retries=0, build_timeout_s=60.0)
VARYING = {
    "h09_fork_bomb.cu": {S.INCORRECT_NUMERICAL, S.RUNTIME_ERROR, S.TIMEOUT},
    "h10_timer_patch.cu": set(S) - {S.PASSED},
}
"""Controls whose verdict may differ between two runs, and the verdicts either run may get."""
SKIP = {"h11_host_memory.cu"}  # needs the hostile suite's lowered memory limit (tests/gpu/test_hostile_gpu.py)


@pytest.fixture(scope="module")
def judge(tmp_path_factory) -> LocalGpuJudge:
    return LocalGpuJudge(JudgeConfig(cache_dir=tmp_path_factory.mktemp("env-hostile"), **CONFIG))


@pytest.fixture(scope="module")
def listener():
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(8)  # never accepted: h07 connects to it
    yield sock.getsockname()[1]
    sock.close()


def _source(path: Path, port: int) -> str:
    return path.read_text().replace("@@PORT@@", str(port))


def _step(judge: LocalGpuJudge, source: str):
    spec = EnvSpec(run_id="gpu-hostile", problem="gemm_n7168_k5120", max_turns=1, policy_model="hostile/controls")
    env = KernelEnv(spec, JudgeEvaluator(judge), spec_prompt(spec))
    env.reset()
    return env.step(f"The kernel.\n```cpp\n{source}\n```\n")


@pytest.mark.parametrize("name", sorted(p.name for p in HOSTILE.glob("h*.cu") if p.name not in SKIP))
def test_hostile_control_gets_the_judges_own_verdict(judge, listener, name):
    source = _source(HOSTILE / name, listener)
    direct = judge.judge(source, get_problem("gemm_n7168_k5120"), get_architecture("hopper"))
    stepped = _step(judge, source)
    status = stepped.info.status
    if name in VARYING:
        assert {status, direct.status} <= VARYING[name], (status, direct.status)
    elif name == "h13_forge_early_reply.cu":  # either verdict, but never more speed than an honest kernel gets
        honest = _step(judge, CORRECT.read_text()).info.speedup
        assert status is not S.PASSED or stepped.info.speedup <= 1.25 * honest
    else:
        assert status is direct.status, (status, direct.status, direct.reason)
    if status is S.REJECTED:
        assert stepped.reward == DEFAULT_REWARD.rejected
    if status is S.REWARD_HACK:
        assert stepped.reward == DEFAULT_REWARD.reward_hack
    assert stepped.info.judge is None or stepped.info.judge.status is status
