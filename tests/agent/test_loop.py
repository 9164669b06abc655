"""MiniPTXAgent against a fake model and a fake evaluator: every stop rule, extraction errors, policies."""

from __future__ import annotations

import pytest

from ptxcore.agent import (
    AgentConfig,
    AgentState,
    CallContext,
    ContextPolicy,
    MiniPTXAgent,
    PriorTurn,
    messages_for_turn,
)
from ptxcore.schema import EvaluationStatus, StopReason

from .fakes import FakeEvaluator, FakeLLM, failed, kernel_answer, passed

CTX = CallContext(problem="gemm_n7168_k5120", arch="hopper", prompt_variant="hopper-pack", trajectory_index=2)


def run(llm, evaluator, prior=(), observer=None, **config):
    agent = MiniPTXAgent(llm, evaluator, AgentConfig(**config))
    return agent.run("SYSTEM", "TASK", CTX, prior=prior, observer=observer)


def test_max_turns_makes_exactly_the_budget_of_calls():
    llm, ev = FakeLLM([kernel_answer("a")]), FakeEvaluator([failed()])
    result = run(llm, ev, max_turns=5)
    assert result.stop_reason is StopReason.MAX_TURNS
    assert len(llm.calls) == 5 and len(ev.sources) == 5
    assert [o.turn for o in result.outcomes] == [0, 1, 2, 3, 4]
    assert [c.turn for _, c in llm.calls] == [0, 1, 2, 3, 4]
    assert all(c.trajectory_index == 2 for _, c in llm.calls)


def test_default_budget_is_eight_and_cannot_exceed_it():
    result = run(FakeLLM([kernel_answer("a")]), FakeEvaluator([failed()]))
    assert result.num_turns == 8
    with pytest.raises(ValueError):
        AgentConfig(max_turns=9)


def test_target_speedup_stops_early():
    ev = FakeEvaluator([failed(), passed(1.1), passed(1.25), passed(2.0)])
    llm = FakeLLM([kernel_answer("a")])
    result = run(llm, ev, target_speedup=1.2)
    assert result.stop_reason is StopReason.TARGET_REACHED
    assert len(llm.calls) == 3  # 1.1 is below the target: the loop went on; 1.25 stopped it
    assert result.best_speedup == pytest.approx(1.25)


def test_speedup_of_an_incorrect_turn_never_stops():
    wrong = failed()
    wrong = wrong.model_copy(update={"speedup": 5.0})  # a judge bug must not end the trajectory
    result = run(FakeLLM([kernel_answer("a")]), FakeEvaluator([wrong]), max_turns=3)
    assert result.stop_reason is StopReason.MAX_TURNS and result.best_speedup is None


def test_context_overflow_stops_before_the_call():
    big = "x" * 4000  # ~1000 tokens per answer with the fake counter
    llm = FakeLLM([f"{big}\n```cpp\nint k;\n```"], window=2600)
    result = run(llm, FakeEvaluator([failed()]), max_turns=8)
    assert result.stop_reason is StopReason.CONTEXT_OVERFLOW
    # call 1: ~2 tokens; call 2: ~1000+; call 3: ~2000+; call 4 would need ~3000 > 2600
    assert len(llm.calls) == 3 and result.num_turns == 3


def test_reserved_output_tokens_count_against_the_window():
    llm = FakeLLM([kernel_answer("a")], window=1000)
    result = run(llm, FakeEvaluator([failed()]), reserve_output_tokens=1000)
    assert result.stop_reason is StopReason.CONTEXT_OVERFLOW and llm.calls == []


def test_provider_reported_overflow_is_the_same_stop():
    llm = FakeLLM([kernel_answer("a")], overflow_at_call=2)
    result = run(llm, FakeEvaluator([failed()]))
    assert result.stop_reason is StopReason.CONTEXT_OVERFLOW and result.num_turns == 2


def test_extraction_error_counts_as_a_turn_and_skips_evaluation():
    answers = ["I will think first.", "```cpp\na\n```\n```cpp\nb\n```", kernel_answer("ok")]
    ev = FakeEvaluator([failed()])
    result = run(FakeLLM(answers), ev, max_turns=3)
    statuses = [o.evaluation.status for o in result.outcomes]
    assert statuses == [EvaluationStatus.EXTRACTION_ERROR, EvaluationStatus.EXTRACTION_ERROR,
                        EvaluationStatus.INCORRECT_NUMERICAL]
    assert len(ev.sources) == 1 and "kernel ok" in ev.sources[0]
    assert "none found" in result.outcomes[0].feedback
    assert "2 ```cpp code blocks" in result.outcomes[1].feedback


def test_feedback_of_each_turn_is_sent_back_on_the_next_call():
    llm = FakeLLM([kernel_answer("a")])
    result = run(llm, FakeEvaluator([failed()]), max_turns=2)
    second_call = llm.calls[1][0]
    assert [m["role"] for m in second_call] == ["system", "user", "assistant", "user"]
    assert second_call[3]["content"] == result.outcomes[0].feedback
    assert second_call[3]["content"].startswith("Status: INCORRECT_NUMERICAL")


def test_observer_sees_each_turn_before_the_next_model_call():
    llm = FakeLLM([kernel_answer("a")])
    seen = []
    run(llm, FakeEvaluator([failed()]), observer=lambda o: seen.append((o.turn, len(llm.calls))), max_turns=3)
    assert seen == [(0, 1), (1, 2), (2, 3)]


def test_resume_continues_after_recorded_turns_without_repeating_them():
    prior = [PriorTurn(response_text=kernel_answer(str(i)), feedback=f"fb {i}", status=EvaluationStatus.COMPILE_ERROR)
             for i in range(3)]
    llm = FakeLLM([kernel_answer("new")])
    result = run(llm, FakeEvaluator([failed()]), prior=prior, max_turns=5)
    assert [o.turn for o in result.outcomes] == [3, 4] and result.num_turns == 5
    first = llm.calls[0][0]
    assert [m["content"] for m in first if m["role"] == "user"][1:] == ["fb 0", "fb 1", "fb 2"]


def test_resume_of_a_finished_trajectory_makes_no_call():
    prior = [PriorTurn(response_text="a", feedback="b", status=EvaluationStatus.PASSED, speedup=1.5)]
    llm = FakeLLM([kernel_answer("a")])
    result = run(llm, FakeEvaluator([failed()]), prior=prior)
    assert result.stop_reason is StopReason.TARGET_REACHED and llm.calls == [] and result.outcomes == []


def test_evaluator_infrastructure_failure_propagates():
    class Broken:
        def evaluate(self, source, context):
            raise ConnectionError("profiling service down")

    with pytest.raises(ConnectionError):
        run(FakeLLM([kernel_answer("a")]), Broken())


@pytest.mark.parametrize("policy", list(ContextPolicy))
def test_each_context_policy_shapes_the_third_call(policy):
    llm = FakeLLM([kernel_answer("a"), kernel_answer("b"), kernel_answer("c")])
    result = run(llm, FakeEvaluator([failed()]), max_turns=3, context_policy=policy)
    third = llm.calls[2][0]
    fb0, fb1 = result.outcomes[0].feedback, result.outcomes[1].feedback
    if policy is ContextPolicy.FULL:
        assert [m["role"] for m in third] == ["system", "user", "assistant", "user", "assistant", "user"]
        assert third[5]["content"] == fb1
    elif policy is ContextPolicy.LATEST_PAIR:
        assert [m["role"] for m in third] == ["system", "user", "assistant", "user"]
        assert third[1]["content"] == "TASK" and "kernel b" in third[2]["content"] and third[3]["content"] == fb1
    else:
        assert [m["role"] for m in third] == ["system", "user"]
        joined = third[1]["content"]
        assert joined.startswith("TASK\n\n") and fb0 in joined and fb1 in joined and "kernel a" in joined
        assert "assistant" not in joined


@pytest.mark.parametrize("policy", list(ContextPolicy))
def test_messages_for_turn_is_what_the_agent_sends(policy):
    """The pure rule (the environment's observation, no model client) gives each call's messages exactly."""
    llm = FakeLLM([kernel_answer("a"), kernel_answer("b"), kernel_answer("c")])
    result = run(llm, FakeEvaluator([failed()]), max_turns=3, context_policy=policy)
    config = AgentConfig(max_turns=3, context_policy=policy)
    state = AgentState(system="SYSTEM", user="TASK")
    for k, outcome in enumerate(result.outcomes):
        assert messages_for_turn(state, config) == llm.calls[k][0]
        state = state.with_turn(PriorTurn(response_text=outcome.reply.text, feedback=outcome.feedback,
                                          status=outcome.evaluation.status))
    assert len(llm.calls) == 3
