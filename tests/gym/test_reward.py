"""The reward spec: hostile YAML first (one line naming the file and field), then the staged score and returns."""

from __future__ import annotations

import math

import pytest

from ptxcore.agent.yamlfile import YamlModelError
from ptxcore.gym import (
    DEFAULT_REWARD,
    RewardBasis,
    RewardFacts,
    RewardSpec,
    discounted_return,
    load_reward_spec,
    returns_to_go,
    score,
)
from ptxcore.schema import EvaluationStatus as S
from ptxcore.schema import TargetInstruction, TargetWork


@pytest.mark.parametrize("text, field", [
    ("correct: -1\n", "correct"),                      # a credit below zero
    ("rejected: 0.5\n", "rejected"),                   # a penalty above zero
    ("gamma: 0\n", "gamma"),                           # no discount of zero
    ("gamma: 1.5\n", "gamma"),
    ("compiled: .nan\n", "compiled"),                  # NaN is no number of credit
    ("speedup_per_log2: .inf\n", "speedup_per_log2"),
    ("bonus: 1\n", "bonus"),                           # unknown key
    ("name: '../../etc'\n", "name"),
    ("speedup_log2_min: 3\nspeedup_log2_max: 1\n", "speedup_log2_min"),
    ("correct: [1, 2]\n", "correct"),
])
def test_bad_reward_yaml_is_one_line_naming_the_field(tmp_path, text, field):
    path = tmp_path / "reward.yaml"
    path.write_text(text)
    with pytest.raises(YamlModelError) as err:
        load_reward_spec(path)
    message = str(err.value)
    assert "\n" not in message and str(path) in message and field in message


@pytest.mark.parametrize("text", ["", "- a\n- b\n", "a: [\n", "x" * (1 << 21)])
def test_malformed_reward_yaml_is_one_line(tmp_path, text):
    path = tmp_path / "reward.yaml"
    path.write_text(text)
    with pytest.raises(YamlModelError) as err:
        load_reward_spec(path)
    assert "\n" not in str(err.value) and str(path) in str(err.value)


def test_reward_yaml_loads_and_its_hash_is_its_content(tmp_path):
    path = tmp_path / "reward.yaml"
    path.write_text("name: mine\ncorrect: 0.5\ngamma: 0.9\n")
    spec = load_reward_spec(path)
    assert spec.correct == 0.5 and spec.gamma == 0.9
    assert spec.sha256 == RewardSpec(name="mine", correct=0.5, gamma=0.9).sha256 != DEFAULT_REWARD.sha256


def facts(status: S, **kw) -> RewardFacts:
    return RewardFacts(status=status, compiled=kw.pop("compiled", status is not S.COMPILE_ERROR), **kw)


def test_default_reward_stages():
    best = score(DEFAULT_REWARD, facts(S.PASSED, target_instruction=TargetInstruction.EXECUTED,
                                       target_work=TargetWork.CARRIES, speedup=8.0))
    assert math.isclose(best.total, 1.0)  # capped at 4x: 0.1 + 0.3 + 0.1 + 0.2 + 0.15 * 2
    slow = score(DEFAULT_REWARD, facts(S.PASSED, target_instruction=TargetInstruction.EXECUTED, speedup=0.5))
    assert math.isclose(slow.total, 0.5) and slow.speedup == 0.0 and slow.target == 0.1
    assert math.isclose(score(DEFAULT_REWARD, facts(S.INCORRECT_NUMERICAL)).total, 0.1)
    assert score(DEFAULT_REWARD, facts(S.COMPILE_ERROR)).total == 0.0
    assert score(DEFAULT_REWARD, facts(S.EXTRACTION_ERROR, compiled=False)).total == 0.0
    assert score(DEFAULT_REWARD, facts(S.REJECTED)).total == -0.5
    hack = score(DEFAULT_REWARD, facts(S.REWARD_HACK, speedup=None))
    assert hack.total == -1.0 and hack.penalty == -1.0 and hack.compiled == 0.0


def test_target_credit_needs_a_correct_kernel():
    wrong = score(DEFAULT_REWARD, facts(S.INCORRECT_NUMERICAL, target_instruction=TargetInstruction.EXECUTED,
                                        target_work=TargetWork.CARRIES))
    assert wrong.target == 0.0 and wrong.correct == 0.0


def test_basis_says_recorded_and_unjudged():
    assert score(DEFAULT_REWARD, facts(S.PASSED, speedup=1.0, recorded=True)).basis is RewardBasis.RECORDED
    unjudged = score(DEFAULT_REWARD, facts(S.NOT_EVALUATED))
    assert unjudged.basis is RewardBasis.UNJUDGED and math.isclose(unjudged.total, 0.1)
    assert score(DEFAULT_REWARD, facts(S.PASSED, speedup=1.0)).basis is RewardBasis.MEASURED


@pytest.mark.parametrize("speedup", [float("nan"), float("inf"), 0.0, -1.0])
def test_non_finite_speedup_earns_no_speed_credit(speedup):
    assert score(DEFAULT_REWARD, facts(S.PASSED, speedup=speedup)).speedup == 0.0


def test_discounted_return_and_returns_to_go():
    rewards = [0.0, 0.1, 1.0]
    assert math.isclose(discounted_return(rewards, 0.5), 0.05 + 0.25)
    assert returns_to_go(rewards, 0.5) == pytest.approx([0.3, 0.6, 1.0])
    assert discounted_return(rewards, 1.0) == pytest.approx(1.1)
