"""KernelEnv: reset returns the agent's first messages, step is one agent turn with the policy's completion."""

from __future__ import annotations

import pytest

from ptxcore.agent import AgentConfig, CallContext, MiniPTXAgent
from ptxcore.gym import EnvSpec, EnvStateError, RewardBasis
from ptxcore.schema import EvaluationStatus, StopReason
from tests.agent.fakes import FakeLLM

from .fakes import PROMPT, MemoryRecorder, kernel_answer, make_env, verdict_by_source


def test_reset_observation_is_what_the_agent_sends_first():
    env, _ = make_env()
    first = env.reset(seed=3)
    llm = FakeLLM([kernel_answer("fast")])
    from tests.agent.fakes import FakeEvaluator

    MiniPTXAgent(llm, FakeEvaluator(rule=verdict_by_source), AgentConfig(max_turns=1)).run(
        PROMPT.system, PROMPT.user, CallContext(problem="gemm_n7168_k5120", arch="hopper", prompt_variant="v"))
    assert first.observation == llm.calls[0][0]
    assert first.trajectory_id == "policy/test/hopper/hopper-pack/gemm_n7168_k5120/0"


def test_steps_match_the_agent_loop_turn_for_turn():
    answers = [kernel_answer("slow"), "no code here", kernel_answer("fast")]
    llm = FakeLLM(answers)
    from tests.agent.fakes import FakeEvaluator

    agent_run = MiniPTXAgent(llm, FakeEvaluator(rule=verdict_by_source), AgentConfig()).run(
        PROMPT.system, PROMPT.user, CallContext(problem="gemm_n7168_k5120", arch="hopper", prompt_variant="v"))
    env, evaluator = make_env()
    env.reset()
    results = [env.step(a) for a in answers]
    assert [r.observation["content"] for r in results] == [o.feedback for o in agent_run.outcomes]
    assert [r.info.status for r in results] == [o.evaluation.status for o in agent_run.outcomes]
    assert results[0].next_messages == llm.calls[1][0] and results[1].next_messages == llm.calls[2][0]
    assert [s.strip() for s in evaluator.sources] == ["// kernel slow\nvoid run() {}", "// kernel fast\nvoid run() {}"]
    assert results[-1].terminated and not results[-1].truncated and results[-1].info.stop_reason is \
        StopReason.TARGET_REACHED == agent_run.stop_reason
    assert results[1].info.status is EvaluationStatus.EXTRACTION_ERROR and results[1].reward == 0.0


def test_truncated_at_the_turn_budget_and_no_step_after_the_end():
    env, _ = make_env(max_turns=2)
    env.reset()
    first = env.step(kernel_answer("slow"))
    second = env.step(kernel_answer("slow"))
    assert not first.truncated and second.truncated and not second.terminated and second.next_messages == []
    with pytest.raises(EnvStateError, match="ended"):
        env.step(kernel_answer("fast"))


def test_step_before_reset_is_refused():
    env, _ = make_env()
    with pytest.raises(EnvStateError, match="reset"):
        env.step(kernel_answer("fast"))


def test_oversized_completion_is_refused_before_anything_runs():
    env, evaluator = make_env()
    env.reset()
    with pytest.raises(ValueError, match="at most"):
        env.step("x" * 400_001)
    assert evaluator.sources == []


def test_rewards_and_records():
    recorder = MemoryRecorder()
    env, _ = make_env(recorder)
    env.reset(seed=7)
    hack = env.step(kernel_answer("hack"))
    fast = env.step(kernel_answer("fast"))
    assert hack.reward == -1.0 and fast.reward == pytest.approx(0.1 + 0.3 + 0.1 + 0.15)
    assert fast.info.reward.basis is RewardBasis.MEASURED
    assert [s.turn for s in recorder.steps] == [0, 1] and {s.seed for s in recorder.steps} == {7}
    assert {s.reward_spec_sha256 for s in recorder.steps} == recorder.specs == {env.spec.reward.sha256}
    assert [t.model for t in recorder.turns] == ["policy/test"] * 2
    episode = recorder.episodes[env.trajectory_id]
    assert episode.stop_reason is StopReason.TARGET_REACHED and episode.num_turns == 2
    assert episode.best_speedup == 2.0 and episode.campaign_id == "rl-test"


def test_episodes_number_themselves_and_policy_can_change_at_reset():
    env, _ = make_env()
    assert env.reset().trajectory_id.endswith("/0")
    again = env.reset(policy_model="policy/step-200")
    assert again.trajectory_id == "policy/step-200/hopper/hopper-pack/gemm_n7168_k5120/1"
    with pytest.raises(ValueError):
        env.reset(policy_model="bad model id\n")
    with pytest.raises(ValueError):
        env.reset(seed=-1)


def test_abandoned_step_ends_the_episode_as_error():
    recorder = MemoryRecorder()
    env, _ = make_env(recorder)
    env.reset()
    env.abandon()
    assert recorder.episodes[env.trajectory_id].stop_reason is StopReason.ERROR
    with pytest.raises(EnvStateError, match="abandoned"):
        env.step(kernel_answer("fast"))


@pytest.mark.parametrize("field, value", [("max_turns", 9), ("max_turns", 0), ("problem", "../x"),
                                          ("run_id", "a b"), ("target_speedup", float("nan")),
                                          ("policy_model", "x" * 300), ("profile", "fastest")])
def test_bad_spec_fields_are_refused(field, value):
    with pytest.raises(ValueError, match=field):
        EnvSpec.model_validate({"problem": "gemm_n7168_k5120", field: value})


def test_rollout_plays_a_policy_until_the_episode_ends():
    from ptxcore.gym.rollout import rollout

    env, _ = make_env(max_turns=4)
    policy = FakeLLM([kernel_answer("slow"), kernel_answer("hack"), kernel_answer("fast")])
    episode = rollout(env, policy, seed=2)
    assert episode.statuses == [EvaluationStatus.INCORRECT_NUMERICAL, EvaluationStatus.REWARD_HACK,
                                EvaluationStatus.PASSED]
    assert episode.stop_reason is StopReason.TARGET_REACHED and episode.best_speedup == 2.0
    assert episode.discounted_return == pytest.approx(sum(episode.rewards))  # gamma 1 by default
    assert [c.turn for _, c in policy.calls] == [0, 1, 2] and {c.trajectory_index for _, c in policy.calls} == {0}


def test_a_new_policy_id_holds_from_that_episode_on():
    env, _ = make_env()
    env.reset(policy_model="policy/step-300")
    assert env.reset().trajectory_id.startswith("policy/step-300/")
