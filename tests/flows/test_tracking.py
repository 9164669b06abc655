"""MLflow run names: only what varies across the campaign, so names differ where the runs table cuts them."""

from __future__ import annotations

from flows.tracking import short_run_names
from ptxcore.agent import parse_campaign, plan_campaign


def names(yaml: str) -> list[str]:
    return sorted(short_run_names(plan_campaign(parse_campaign(yaml))).values())


def test_a_one_model_one_variant_campaign_is_named_by_problem():
    assert names("name: a\nmodels: [{model: replay/demo}]\nproblems: [gemm_n7168_k5120, mha_bwd_d128]\n"
                 "prompt_variants: [hopper-pack]\ntrajectories: 1\n") == ["gemm_n7168_k5120", "mha_bwd_d128"]


def test_models_and_repeats_appear_only_when_they_vary():
    got = names("name: b\nmodels: [{model: replay/demo}, {model: replay/scripted}]\nproblems: [gemm_n7168_k5120]\n"
                "prompt_variants: [hopper-pack]\ntrajectories: 2\n")
    assert got == ["replay/demo #0", "replay/demo #1", "replay/scripted #0", "replay/scripted #1"]
    two = names("name: c\nmodels: [{model: replay/demo}, {model: replay/scripted}]\n"
                "problems: [gemm_n7168_k5120, mha_bwd_d128]\nprompt_variants: [hopper-pack]\ntrajectories: 1\n")
    assert two[0] == "replay/demo · gemm_n7168_k5120" and len(set(two)) == 4
