"""Monologue extraction and acceptance rules, the rewrite target, and the synthesis request."""

from __future__ import annotations

import pytest

from ptxcore.adapt.models import ReasoningStatus as R
from ptxcore.adapt.reasoning import (
    extract_reasoning,
    judge_reasoning,
    rewrite_messages,
    rewrite_target,
    synthesis_messages,
)
from ptxcore.adapt.recipe import SynthesizerSpec
from ptxcore.adapt.spec import Template
from ptxcore.agent.campaign import ModelSpec

SPEC = SynthesizerSpec(model=ModelSpec(model="replay/x"), min_reasoning_chars=20, max_reasoning_chars=400)
OK = "I notice the LSE store indexes by row times D; LSE is [B, H, S], so the index must be bh * S + q."


def test_extraction_drops_provider_thinking_and_delimiters():
    raw = "<think>scratch</think>\n<my_reasoning>\n  " + OK + "\n</my_reasoning>\ntrailing"
    assert extract_reasoning(raw) == OK
    assert extract_reasoning(OK + "  ") == OK  # no delimiters: everything left
    assert extract_reasoning("") == ""


@pytest.mark.parametrize("text, status", [
    (OK, R.ACCEPTED),
    ("too short", R.TOO_SHORT),
    ("x" * 401, R.TOO_LONG),
    (OK + " <my_reasoning>", R.FORBIDDEN_TOKEN),
    (OK + " </think> done", R.FORBIDDEN_TOKEN),
    (OK + " As the expert's kernel shows, this works.", R.MENTIONS_SOLUTION),
    (OK + " Looking at the correct kernel, the mask is key > q.", R.MENTIONS_SOLUTION),
    (OK + " The fixed kernel below uses bh * S + q.", R.MENTIONS_SOLUTION),
    (OK + " A correct kernel must index LSE per row.", R.ACCEPTED),  # speaking of correctness is fine
    (OK + " The solution shown uses a mask.", R.MENTIONS_SOLUTION),
    (OK + " The correct kernel above stores LSE once.", R.MENTIONS_SOLUTION),
    # words that point at what the expert did see (the wrong kernel, the definition's reference) are legal
    (OK + " The given kernel above sets tnspB=1, so B is read transposed.", R.ACCEPTED),
    (OK + " The reference code shown computes softmax in float32.", R.ACCEPTED),
    (OK + " The provided code above launches one CTA per row.", R.ACCEPTED),
    (OK + " In the fixed version I will commit the wgmma group first.", R.ACCEPTED),
])
def test_acceptance_rules(text, status):
    assert judge_reasoning(text, SPEC, kernel="")[0] is status


def test_a_monologue_holding_the_whole_kernel_is_rejected():
    kernel = "\n".join(f"int line_{i} = {i} * stride;" for i in range(12))
    spec = SPEC.model_copy(update={"max_reasoning_chars": 5000})
    status, detail = judge_reasoning(OK + "\n" + kernel.replace("\n", "  \n "), spec, kernel)
    assert status is R.COPIES_SOLUTION and "whole kernel" in detail
    assert judge_reasoning(OK + "\nint line_3 = 3 * stride;", spec, kernel)[0] is R.ACCEPTED  # a snippet is fine


def test_length_rules_are_the_authors_per_template():
    """The authors accept Fixit monologues from 2,000 characters and KernelGen ones from 200, both at most 190,000
    (fixit_downstream_process.py --min/--max-reasoning-chars; experiments/kernelgen/synthesize-full.yaml), retry a
    Fixit pair over up to 20 passes (--max-passes 20) and make one KernelGen pass."""
    spec = SynthesizerSpec(model=ModelSpec(model="replay/x"))
    assert (spec.min_chars(Template.FIXIT), spec.min_chars(Template.KERNELGEN), spec.max_reasoning_chars) == \
        (2000, 200, 190_000)
    assert (spec.attempts(Template.FIXIT), spec.attempts(Template.KERNELGEN)) == (20, 1)
    text = "I check the LSE index once more. " * 61  # 2,013 characters
    assert judge_reasoning(text[:1999], spec, "", Template.FIXIT)[0] is R.TOO_SHORT
    assert judge_reasoning(text[:2000], spec, "", Template.FIXIT)[0] is R.ACCEPTED
    assert judge_reasoning(text[:200], spec, "", Template.KERNELGEN)[0] is R.ACCEPTED
    assert judge_reasoning("x" * 190_001, spec, "", Template.KERNELGEN)[0] is R.TOO_LONG


def test_the_request_asks_for_a_long_monologue_at_full_depth():
    """Both of the authors' prompts target 40,000 characters (not to be mentioned) at maximum depth."""
    for template in Template:
        system, user = synthesis_messages(template, "K", "T", "k")
        assert "greatest depth" in system["content"]
        assert "about 40,000 characters" in user["content"] and "never mention this length" in user["content"]
    assert "about 12,345 characters" in synthesis_messages(Template.FIXIT, "K", "T", "k", 12_345)[1]["content"]


def test_a_delimiter_is_rewritten_not_dropped():
    """The authors' resynthesis rewrites a monologue holding <my_reasoning> / </my_reasoning> with minimal edits,
    to between 95 % and all of its length (target_reasoning_limits without over_max_tokens)."""
    from ptxcore.adapt.reasoning import RewriteIssue, judge_rewrite, without_forbidden

    text = OK + " <my_reasoning> " + OK
    target = rewrite_target(text, 0, 0, 65_536, SPEC, over_budget=False)
    assert (target.min_chars, target.max_chars) == (-(-len(text) * 95 // 100), len(text))
    user = rewrite_messages(text, target, (RewriteIssue.FORBIDDEN_TOKEN,))[1]["content"]
    assert "must hold none of them" in user and "do not condense" in user and "too long" not in user
    assert "<my_reasoning>" not in without_forbidden(text)
    assert judge_rewrite(text, "")[0] is R.FORBIDDEN_TOKEN and judge_rewrite(OK, "")[0] is R.ACCEPTED


def test_rewrite_target_fits_the_room_left():
    spec = SPEC.model_copy(update={"safety_tokens": 100, "min_target_ratio": 0.9})
    # 4000 chars in 1000 tokens; the rest of the row takes 60,000 of 65,536: room 5,436 - 100 -> keep all 1000
    t = rewrite_target("x" * 4000, 60_000, 1000, 65_536, spec)
    assert (t.max_chars, t.min_chars) == (4000, 3600)
    t = rewrite_target("x" * 40_000, 60_000, 10_000, 65_536, spec)  # room 5,436 tokens -> 21,744 chars
    assert t.max_chars == 21_744 and t.min_chars == 19_570
    assert rewrite_target("x" * 100, 70_000, 50, 65_536, spec) is None


def test_requests_hold_what_the_expert_saw_and_the_kernel():
    msgs = synthesis_messages(Template.FIXIT, "KNOWLEDGE", "TASK + WRONG + ERROR", "__global__ void k();")
    assert [m["role"] for m in msgs] == ["system", "user"] and "<my_reasoning>" in msgs[0]["content"]
    user = msgs[1]["content"]
    assert user.index("KNOWLEDGE") < user.index("TASK + WRONG + ERROR") < user.index("__global__ void k();")
    assert "why the wrong kernel is wrong" in user and "never refer to it" in user
    assert "wrong kernel" not in synthesis_messages(Template.KERNELGEN, "K", "T", "k")[1]["content"].split("# The")[0]
    rw = rewrite_messages(OK, rewrite_target(OK * 10, 1000, 100, 3000, SPEC))
    assert OK in rw[1]["content"] and "characters" in rw[1]["content"]
