"""MLflow run names: only what varies across the campaign, the telling part first, so names differ where the runs
table cuts them."""

from __future__ import annotations

from flows.tracking import lead_with_difference, short_run_names
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
    assert two[0] == "gemm_n7168_k5120 · replay/demo" and len(set(two)) == 4


def test_the_demo_names_differ_within_the_characters_the_runs_table_shows():
    """MLflow's runs table cut "mha_with_lse_d128" and "mha_with_lse_d128_causal" to the same "mha_with_lse_…":
    the words that tell sibling problems apart come first."""
    got = names("name: d\nmodels: [{model: replay/demo}]\nproblems: primary\nprompt_variants: [hopper-pack]\n"
                "trajectories: 1\n")
    assert got == ["bwd · mha_d128", "bwd_causal · mha_d128", "gemm_n7168_k5120", "with_lse · mha_d128",
                   "with_lse_causal · mha_d128"]
    assert len({n[:12] for n in got}) == len(got)


def test_a_problem_alone_in_its_family_keeps_its_name():
    assert lead_with_difference(["gemm_n7168_k5120", "mha_bwd_d128"]) == {
        "gemm_n7168_k5120": "gemm_n7168_k5120", "mha_bwd_d128": "mha_bwd_d128"}
    gqa = lead_with_difference(["gqa_paged_decode_h24_kv8_d128_ps1", "gqa_paged_prefill_causal_h24_kv8_d128_ps1"])
    assert gqa["gqa_paged_decode_h24_kv8_d128_ps1"] == "decode · gqa_paged_h24_kv8_d128_ps1"
