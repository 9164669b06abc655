"""Notes distillation: the prompt, answer parsing, and collection with the replay teacher through litellm."""

from __future__ import annotations

import json

import pytest
import yaml

from ptxcore.adapt.retrieval import collect_notes, distill_messages, parse_notes
from ptxcore.adapt.retrieval.models import Completeness

from .notes_data import TMA_FIXED, TMA_WRONG, WGMMA_FIXED, WGMMA_WRONG, pair

GOOD = {
    "summary": "The wgmma group was never committed or waited on.",
    "instruction_notes": [
        {"instruction": "wgmma.commit_group.sync.aligned", "operand_contract": "no operands",
         "required_sequence": ["wgmma.fence", "wgmma.mma_async", "wgmma.commit_group", "wgmma.wait_group"],
         "example_completeness": "partial", "missing_details": ["descriptor construction"], "confidence": 0.9},
        {"instruction": "wgmma.wait_group.sync.aligned 0", "diagnostics": ["max_abs_error=3.5"]},
    ],
    "tags": "wgmma",
    "extra_top_level": True,
}


def test_prompt_carries_both_kernels_feedback_and_context():
    system, user = distill_messages(pair("a"))
    assert system["role"] == "system" and '{"name": "mha_with_lse_d128"} task' in system["content"]
    assert WGMMA_WRONG.rstrip() in user["content"] and WGMMA_FIXED.rstrip() in user["content"]
    assert "max_abs_error=3.5" in user["content"] and "INCORRECT_NUMERICAL" in user["content"]
    for field in ("instruction", "shape_context", "correct_example", "wrong_example", "operand_contract",
                  "required_sequence", "diagnostics", "do_not_do"):
        assert f'"{field}"' in user["content"]


def test_parse_accepts_plain_fenced_and_embedded_json_and_ignores_unknown_keys():
    for text in (json.dumps(GOOD), f"```json\n{json.dumps(GOOD)}\n```", f"Here you go:\n{json.dumps(GOOD)}\nDone."):
        notes = parse_notes(text)
        assert [n.instruction for n in notes.instruction_notes] == ["wgmma.commit_group.sync.aligned",
                                                                     "wgmma.wait_group.sync.aligned 0"]
        first = notes.instruction_notes[0]
        assert first.operand_contract == ["no operands"] and first.example_completeness is Completeness.PARTIAL
        assert notes.tags == ["wgmma"]


@pytest.mark.parametrize("text, message", [
    ("no json at all", "no JSON object"),
    ('{"summary": "x", "instruction_notes": [}', "invalid JSON"),
    ("[1, 2]", "not an object"),
    ('{"summary": "x", "instruction_notes": []}', "instruction_notes: List should have at least 1 item"),
    ('{"instruction_notes": [{"shape_context": "x"}]}', "instruction_notes.0.instruction: Field required"),
    (json.dumps({"instruction_notes": [{"instruction": "x"}] * 9}), "at most 8 items"),
    (json.dumps({"instruction_notes": [{"instruction": "x" * 5000}]}), "at most 4000 characters"),
])
def test_parse_refuses_with_one_line(text, message):
    with pytest.raises(ValueError, match=message) as info:
        parse_notes(text)
    assert "\n" not in str(info.value)


def _library(root, name, scripts):
    lib = root / name
    lib.mkdir(parents=True)
    for filename, (problem, answer) in scripts.items():
        (lib / filename).write_text(yaml.safe_dump({"problem": problem, "arch": "hopper",
                                                    "turns": [{"response": answer}]}))
    return f"replay/{name}"


def test_collect_with_the_replay_teacher_through_litellm(tmp_path, monkeypatch):
    from ptxcore.agent.llm import LiteLLMClient

    monkeypatch.setenv("PTXBENCH_REPLAY_DIR", str(tmp_path))
    model = _library(tmp_path, "teacher-a", {
        "mha_with_lse_d128.yaml": ("mha_with_lse_d128", json.dumps(GOOD)),
        "mha_with_lse_d128.1.yaml": ("mha_with_lse_d128", "I cannot produce JSON today."),
        "gemm_n7168_k5120.yaml": ("gemm_n7168_k5120", "```json\n" + json.dumps(GOOD) + "\n```"),
    })
    pairs = [pair("a"), pair("b"), pair("c", "gemm_n7168_k5120", TMA_WRONG, TMA_FIXED), pair("d")]
    progressed = []
    out = collect_notes(pairs, LiteLLMClient(model), done={"d"}, on_pair=progressed.append)
    # per problem, pair k is served script k (round-robin): a -> good, b -> refused; c -> good (fenced)
    assert [r.pair_id for r in out.records] == ["a", "c"] and out.skipped == ["d"] and progressed == ["a", "b", "c"]
    assert [(f.pair_id, f.reason) for f in out.failures] == [("b", "no JSON object in the answer")]
    a = out.records[0]
    assert a.teacher_model.startswith("replay/") and a.wrong_kernel == WGMMA_WRONG and a.fixed_speedup == 0.5
    assert len(a.prompt_sha256) == 64 and a.summary == GOOD["summary"] and a.problem == "mha_with_lse_d128"
    with pytest.raises(ValueError, match="share a pair_id"):
        collect_notes([pair("x"), pair("x")], LiteLLMClient(model))


def test_pairs_from_warehouse_turns():
    from ptxcore.adapt.retrieval import repair_pair_from_turns
    from ptxcore.schema import EvaluationStatus, TargetInstruction
    from tests.warehouse.conftest import full_turn

    wrong = full_turn(trajectory="t1", turn=2, status=EvaluationStatus.COMPILE_ERROR, kernel_text=WGMMA_WRONG,
                      feedback="error: bad wgmma", speedup=None, target_instruction=TargetInstruction.UNKNOWN)
    fixed = full_turn(campaign="repair", trajectory="r1", turn=1, kernel_text=WGMMA_FIXED, speedup=0.3)
    p = repair_pair_from_turns("pp", wrong, fixed, task_prompt="ctx")
    assert (p.wrong_kernel, p.fixed_kernel, p.wrong_status, p.wrong_feedback) == (
        WGMMA_WRONG, WGMMA_FIXED, EvaluationStatus.COMPILE_ERROR, "error: bad wgmma")
    assert p.fixed_speedup == 0.3 and p.fixed_target_instruction is TargetInstruction.EXECUTED
    assert (p.wrong_ref.turn, p.fixed_ref.campaign_id, p.problem) == (2, "repair", "gemm_n7168_k5120")
    with pytest.raises(ValueError, match="not PASSED"):
        repair_pair_from_turns("pp", wrong, wrong)
    with pytest.raises(ValueError, match="need a kernel"):
        repair_pair_from_turns("pp", wrong.model_copy(update={"kernel_text": None}), fixed)
