"""The notes step: a build's pairs -> a repair-notes corpus (warehouse collection + JSONL + provenance) that a
campaign's repair_retrieval reads; resumable; the teacher sees model-facing feedback only."""

from __future__ import annotations

import json

import pytest

from ptxcore.adapt import AdaptError, parse_recipe, run_pairs, run_select
from ptxcore.adapt.notes import repair_pairs, run_notes
from ptxcore.adapt.retrieval import RepairNotesIndex, read_notes_file, read_warehouse_notes
from ptxcore.agent.llm import LiteLLMClient

from .conftest import add_campaign
from .test_stages import RECIPE, Counting, built_pairs, ctx_for, simulate_repairs, source_turns

NOTES = "notes:\n  teacher: {model: replay/adapt-notes}\n"


def _built(wh):
    ctx = ctx_for(wh)
    return built_pairs(wh, ctx.model_copy(update={"recipe": parse_recipe(ctx.recipe_text + NOTES),
                                                  "recipe_text": ctx.recipe_text + NOTES}))


def test_pairs_become_a_corpus_with_provenance_and_a_rerun_calls_nothing(wh, tmp_path):
    ctx = _built(wh)
    assert ctx.recipe.steps() == ("select", "repair", "pairs", "notes", "reason", "export")
    client = Counting("replay/adapt-notes")
    first = run_notes(wh, ctx, client, tmp_path / "out")
    assert (first.collection_id, first.pairs, first.distilled, first.records, first.refused) == \
        ("t-fixit-notes", 2, 2, 2, {})
    stored = read_warehouse_notes(wh, "t-fixit-notes")
    assert read_notes_file(tmp_path / "out" / "t-fixit-notes.notes.jsonl") == stored
    assert first.corpus_sha256 == RepairNotesIndex(stored).corpus_sha256
    prov = json.loads((tmp_path / "out" / "t-fixit-notes.notes.provenance.json").read_text())
    assert prov["build_id"] == "t-fixit" and prov["teacher"] == "replay/adapt-notes" and prov["records"] == 2
    assert prov["sources"] == ["src", "t-fixit-repair"] and len(prov["prompt_template_sha256"]) == 64
    for r in stored:  # each record names both turns it came from
        assert r.wrong_ref.campaign_id == "src" and r.fixed_ref.campaign_id == "t-fixit-repair"
        assert r.teacher_model == "replay/adapt-notes" and len(r.prompt_sha256) == 64
    again = run_notes(wh, ctx, client, tmp_path / "out")
    assert client.calls == 2 and again.distilled == 0 and again.records == 2


def test_the_teacher_sees_feedback_without_our_traceback(wh):
    trace = ("Status: RUNTIME_ERROR\nLog (trimmed):\nTraceback (most recent call last):\n"
             '  File "/work/main/ptxcore/gpu/child/session.py", line 203, in run_session\n    chan.send(x)\n'
             '  File "/scratch/kernel.cu", line 241, in make_map\nRuntimeError: cuTensorMapEncodeTiled failed')
    src = [t if t.turn != 0 or t.trajectory_id != "qwen/hopper/hopper-pack/mha/0" else
           t.model_copy(update={"feedback": trace}) for t in source_turns()]
    add_campaign(wh, "src", src)
    ctx = ctx_for(wh)
    run_select(wh, ctx)
    simulate_repairs(wh, ctx)
    run_pairs(wh, ctx)
    feedback = [p.wrong_feedback for p in repair_pairs(wh, ctx) if p.wrong_ref.turn == 0][0]
    assert "Traceback" not in feedback and "/work/main" not in feedback and "session.py" not in feedback
    assert "RuntimeError: cuTensorMapEncodeTiled failed" in feedback and "at kernel.cu line 241" in feedback


def test_notes_need_a_fixit_recipe_with_a_notes_section(wh, tmp_path):
    ctx = _built(wh)
    bare = ctx.model_copy(update={"recipe": parse_recipe(RECIPE.format(mha="mha_with_lse_d128", gemm="gemm_n7168_k5120",
                                                                       budget=65536))})
    with pytest.raises(AdaptError, match="no `notes` section"):
        run_notes(wh, bare, LiteLLMClient("replay/adapt-notes"), tmp_path)
    kg = "name: k\ntemplate: kernelgen\nselection: {source_campaigns: [c]}\nsynthesizer: {model: {model: replay/x}}\n"
    with pytest.raises(AdaptError, match="no \\(wrong, fixed\\) pairs to distil"):
        parse_recipe(kg + NOTES)
