"""The environment's HTTP front. Hostile requests first (token, Host, Origin, sizes, fields, ids), then a client
episode that equals the in-process one."""

from __future__ import annotations

import httpx
import pytest

from ptxcore.gym import EnvBuilder, EnvSpec, KernelEnv, StepResult, spec_prompt
from ptxcore.gym.batch import StepFailure
from ptxcore.gym.http import EnvClient, EnvHub, EnvRequestError, EnvServer, EnvServerConfig, InsecureEnvBind
from ptxcore.gym.http.models import MAX_BATCH
from tests.agent.fakes import FakeEvaluator

from .fakes import MemoryRecorder, kernel_answer, verdict_by_source

SECRET = "S" * 40


class FakeJudgeBuilder(EnvBuilder):
    """The real spec and prompt checks, the fake evaluator (no nvcc, no GPU)."""

    def make(self, spec):
        return KernelEnv(spec, FakeEvaluator(rule=verdict_by_source), spec_prompt(spec), recorder=self.recorder,
                         episodes=self.episodes)


@pytest.fixture
def server(tmp_path, monkeypatch):
    monkeypatch.setenv("PTXBENCH_PROFILER_TOKEN_DIR", str(tmp_path / "tokens"))
    recorder = MemoryRecorder()
    hub = EnvHub(FakeJudgeBuilder(route="none", recorder=recorder), run_id="rl-http", max_envs=3)
    with EnvServer(hub, EnvServerConfig(port=0)) as srv:
        srv.recorder = recorder
        yield srv


def raw(server, token: str | None = "auto", **kw) -> httpx.Client:
    token = server.token if token == "auto" else token
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return httpx.Client(base_url=server.url, headers={**headers, **kw.pop("headers", {})}, timeout=30)


@pytest.mark.parametrize("token", [None, "wrong-token-wrong-token", ""])
def test_writes_need_the_per_start_token(server, token):
    with raw(server, token) as http:
        assert http.post("/envs", json={"problem": "gemm_n7168_k5120"}).status_code == 401
        assert http.get("/health").status_code == 200  # reads need none without a shared token
    assert server.hub.count() == 0


def test_shared_token_guards_every_request(tmp_path):
    hub = EnvHub(FakeJudgeBuilder(route="none"), max_envs=1)
    with EnvServer(hub, EnvServerConfig(port=0, token=SECRET)) as srv:
        assert srv.token_file is None
        with raw(srv, None) as http:
            assert http.get("/health").status_code == 401
        with raw(srv, SECRET) as http:
            assert http.get("/health").status_code == 200


@pytest.mark.parametrize("headers, status", [({"Host": "evil.example"}, 400), ({"Origin": "http://evil.example"}, 403),
                                              ({"Sec-Fetch-Site": "cross-site"}, 403)])
def test_browsers_and_rebinding_are_refused(server, headers, status):
    with raw(server, headers=headers) as http:
        assert http.post("/envs", json={"problem": "gemm_n7168_k5120"}).status_code == status


def test_oversized_body_is_413(server):
    with raw(server) as http:
        assert http.post("/envs", content=b"{" + b" " * (17 << 20) + b"}",
                         headers={"content-type": "application/json"}).status_code == 413


@pytest.mark.parametrize("body, field", [
    ({"problem": "../../etc/passwd"}, "problem"),
    ({"problem": "gemm_n7168_k5120", "max_turns": 99}, "max_turns"),
    ({"problem": "gemm_n7168_k5120", "reward": {"gamma": 5}}, "gamma"),
    ({"problem": "gemm_n7168_k5120", "route": "plugin:os:system"}, "route"),  # no request names a judge
    ({"problem": "gemm_n7168_k5120", "recorded": "/etc"}, "recorded"),
    ({"problem": "gemm_n7168_k5120", "policy_model": "a b\\ud800"}, "policy_model"),  # a lone surrogate
    ({"problem": "gemm_n7168_k5120", "target_speedup": "NaN"}, "target_speedup"),
])
def test_bad_fields_are_422_without_echoing_the_value(server, body, field):
    import json

    with raw(server) as http:
        reply = http.post("/envs", content=json.dumps(body).replace("\\\\ud800", "\\ud800"),
                          headers={"content-type": "application/json"})
    assert reply.status_code == 422 and field in reply.text
    assert "passwd" not in reply.text and "os:system" not in reply.text


def test_unknown_problem_or_variant_is_422(server):
    with raw(server) as http:
        assert http.post("/envs", json={"problem": "no_such_problem"}).status_code == 422
        assert http.post("/envs", json={"problem": "gemm_n7168_k5120", "prompt_variant": "nope"}).status_code == 422
    assert server.hub.count() == 0


def test_ids_limits_and_order(server):
    with raw(server) as http:
        assert http.post(f"/envs/{'0' * 32}/reset", json={}).status_code == 404
        assert http.post("/envs/..%2F..%2Fx/reset", json={}).status_code in (404, 422)
        assert http.post(f"/envs/{'Z' * 32}/step", json={"completion": "x"}).status_code == 422
        env_ids = [http.post("/envs", json={"problem": "gemm_n7168_k5120"}).json()["env_id"] for _ in range(3)]
        assert http.post("/envs", json={"problem": "gemm_n7168_k5120"}).status_code == 429
        assert http.post(f"/envs/{env_ids[0]}/step", json={"completion": kernel_answer("fast")}).status_code == 409
        assert http.post(f"/envs/{env_ids[0]}/reset", json={"seed": -1}).status_code == 422
        assert http.post(f"/envs/{env_ids[0]}/step", json={"completion": "x" * 400_001}).status_code == 422
        one = {"env_id": env_ids[0], "completion": "x"}
        assert http.post("/step_many", json={"items": [one, one]}).status_code == 422
        assert http.post("/step_many", json={"items": [one] * (MAX_BATCH + 1)}).status_code == 422
        assert http.delete(f"/envs/{env_ids[0]}").status_code == 204
        assert http.delete(f"/envs/{env_ids[0]}").status_code == 404


def test_non_loopback_bind_needs_a_shared_token():
    hub = EnvHub(FakeJudgeBuilder(route="none"))
    with pytest.raises(InsecureEnvBind):
        EnvServer(hub, EnvServerConfig(host="0.0.0.0", port=0))
    with pytest.raises(InsecureEnvBind):
        EnvServer(hub, EnvServerConfig(port=0, token="short"))


def test_client_episode_equals_the_in_process_one(server):
    answers = [kernel_answer("slow"), kernel_answer("hack"), kernel_answer("fast")]
    local = FakeJudgeBuilder(route="none").make(EnvSpec(run_id="rl-http", problem="gemm_n7168_k5120",
                                                         policy_model="policy/test"))
    local_first = local.reset(seed=5)
    expected = [local.step(a) for a in answers]
    with EnvClient(server.url) as client:  # finds the per-start token for a loopback URL
        env = client.create("gemm_n7168_k5120", policy_model="policy/test")
        first = env.reset(seed=5)
        got = [env.step(a) for a in answers]
    assert first == local_first and first.observation[0]["role"] == "system"
    for a, b in zip(got, expected, strict=True):
        assert (a.observation, a.reward, a.terminated, a.truncated) == (b.observation, b.reward, b.terminated,
                                                                        b.truncated)
        assert a.info.model_dump(exclude={"step_s"}) == b.info.model_dump(exclude={"step_s"})
    assert [s.seed for s in server.recorder.steps] == [5, 5, 5]


def test_client_step_many_and_errors(server):
    with EnvClient(server.url) as client:
        a, b = client.create("gemm_n7168_k5120"), client.create("gemm_n7168_k5120")
        a.reset()
        out = client.step_many([(a, kernel_answer("fast")), (b, kernel_answer("fast"))])
        assert isinstance(out[0], StepResult) and out[0].terminated
        assert isinstance(out[1], StepFailure) and out[1].kind.value == "state"
        with pytest.raises(EnvRequestError) as err:
            a.step(kernel_answer("fast"))
        assert err.value.status_code == 409 and "ended" in err.value.detail


def _example(name: str):
    import importlib.util
    import sys
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "docs" / "examples" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"example_{name}", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def test_openenv_style_adapter_plays_an_episode(server):
    example = _example("openenv_client")
    with example.PTXBenchEnv(server.url, problem="gemm_n7168_k5120", max_turns=3) as env:
        result = env.reset(seed=1)
        assert not result.done and result.observation.messages[0]["role"] == "system"
        rewards = []
        for answer in (kernel_answer("slow"), kernel_answer("fast")):
            result = env.step(example.KernelAction(completion=answer))
            rewards.append(result.reward)
        assert result.done and result.observation.messages == [] and env.state()["step_count"] == 2
        assert rewards[0] == pytest.approx(0.1) and result.observation.info["status"] == "PASSED"


def test_trl_rollout_core_returns_rewards_beside_tokens(server):
    example = _example("trl_grpo_rollout")

    def generate(messages):
        assert all(m[0]["role"] == "system" for m in messages)
        return [{"text": kernel_answer(tag), "prompt_ids": [1], "completion_ids": [2, 3], "logprobs": [-0.1, -0.2]}
                for tag in ("fast", "hack")]

    with EnvClient(server.url) as client:
        out = example.ptxbench_rollout(["gemm_n7168_k5120"] * 2, generate, client, policy_model="grpo/test")
    assert out["env_status"] == ["PASSED", "REWARD_HACK"] and out["env_reward"][1] == -1.0
    assert out["completion_ids"] == [[2, 3], [2, 3]] and server.hub.count() == 0
    assert {t.model for t in server.recorder.turns} == {"grpo/test"}
