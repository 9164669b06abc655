"""Campaign files: the bundled ones validate; errors name the file, the line and the key."""

from __future__ import annotations

import pytest

from ptxcore.agent import CampaignConfigError, load_campaign, parse_campaign, plan_campaign
from ptxcore.agent.types import ContextPolicy

BASE = """\
name: t
models:
  - model: replay/scripted
architectures: [hopper]
problems: [gemm_n7168_k5120]
prompt_variants: [hopper-pack]
trajectories: 2
turns: 3
"""


def error_of(text: str) -> str:
    with pytest.raises(CampaignConfigError) as info:
        parse_campaign(text, where="c.yaml")
    return str(info.value)


def test_bundled_campaigns_validate_and_plan(repo_root):
    demo, _ = load_campaign(repo_root / "campaigns" / "demo.yaml")
    plans = plan_campaign(demo)
    assert demo.models[0].model == "replay/demo" and len(plans) == 5 and demo.turns <= 8
    assert {p.problem for p in plans} == set(demo.problem_names()) and len(demo.problem_names()) == 5
    paper, _ = load_campaign(repo_root / "campaigns" / "paper.yaml")
    plans = plan_campaign(paper)
    assert len(paper.models) == 4 and paper.architectures == ["hopper", "blackwell"]
    assert len(plans) == 4 * 2 * 3 * 4 * 5 and paper.turns == 8
    assert len({p.trajectory_id for p in plans}) == len(plans)


def test_unknown_key_names_key_and_line():
    msg = error_of(BASE.replace("  - model: replay/scripted", "  - model: replay/scripted\n    temprature: 0.5"))
    assert msg.startswith("c.yaml:4: models.0.temprature: unknown key")


def test_bad_architecture_problem_and_turns_name_their_lines():
    assert error_of(BASE.replace("[hopper]", "[hopper, b300]")).startswith("c.yaml:4: architectures.1: unknown architecture 'b300'")
    assert error_of(BASE.replace("[gemm_n7168_k5120]", "[gemm_n7168_k5120, gemm_nope]")).startswith(
        "c.yaml:5: problems.1: unknown problem 'gemm_nope'")
    assert error_of(BASE.replace("turns: 3", "turns: 9")).startswith("c.yaml:8: turns: Input should be less than or equal to 8")


def test_yaml_syntax_error_has_a_line():
    assert error_of(BASE + "concurrency: {trajectories: 2\n").startswith("c.yaml:10: invalid YAML")


def test_missing_models_and_duplicate_labels():
    assert "models: Field required" in error_of("name: t\n")
    two = BASE.replace("  - model: replay/scripted", "  - model: replay/scripted\n  - model: replay/scripted")
    assert "distinct `label`" in error_of(two)


def test_aliases_normalise_and_overrides_apply():
    cfg = parse_campaign(BASE.replace("[hopper]", "[h200]") + "context_policy: latest-pair\n"
                         "concurrency: {gpu_slots: {h100: 2}}\nprofilers: {H200: http://gpu:8000}\n")
    assert cfg.architectures == ["hopper"] and cfg.concurrency.gpu_slots == {"hopper": 2}
    assert cfg.profilers == {"hopper": "http://gpu:8000"} and cfg.context_policy is ContextPolicy.LATEST_PAIR
    assert cfg.id == "t"


def test_variant_of_another_architecture_is_rejected():
    with pytest.raises(CampaignConfigError, match="written for blackwell"):
        plan_campaign(parse_campaign(BASE.replace("[hopper-pack]", "[hopper-pack, blackwell-pack]")))
    with pytest.raises(CampaignConfigError, match="prompt_variants: unknown prompt variant"):
        plan_campaign(parse_campaign(BASE.replace("[hopper-pack]", "[hopper-nope]")))


def test_plan_fans_out_in_order_with_unique_ids():
    cfg = parse_campaign(BASE.replace("[gemm_n7168_k5120]", "[gemm_n7168_k5120, mha_with_lse_d128]")
                         .replace("[hopper-pack]", "[hopper-pack, hopper-guided]"))
    plans = plan_campaign(cfg)
    assert len(plans) == 2 * 2 * 2
    assert [(p.prompt_variant, p.index, p.problem) for p in plans[:4]] == [
        ("hopper-pack", 0, "gemm_n7168_k5120"), ("hopper-pack", 0, "mha_with_lse_d128"),
        ("hopper-pack", 1, "gemm_n7168_k5120"), ("hopper-pack", 1, "mha_with_lse_d128")]
    assert plans[0].trajectory_id == "replay/scripted/hopper/hopper-pack/gemm_n7168_k5120/0"
    assert plans[0].label == "replay/scripted / hopper / hopper-pack / gemm_n7168_k5120 / #0"
    assert all(p.agent.max_turns == 3 for p in plans)


def test_decoding_max_tokens_is_reserved_in_the_context_check():
    cfg = parse_campaign(BASE.replace("  - model: replay/scripted", "  - model: replay/scripted\n    decoding: {max_tokens: 4096}"))
    assert plan_campaign(cfg)[0].agent.reserve_output_tokens == 4096
