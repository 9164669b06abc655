"""The build's stages end to end on a warehouse (no Prefect): select -> repair plan -> (repair turns as the
campaign records them) -> pairs -> reasoning through the replay model -> export, loaded with datasets
and pyarrow; reruns add nothing and make no model call twice."""

from __future__ import annotations

import json

import pytest

from ptxcore.adapt import (
    AdaptError,
    BuildContext,
    ReasonBook,
    finish_repair,
    parse_recipe,
    plan_repair,
    resolve_counter,
    run_export,
    run_job,
    run_pairs,
    run_select,
)
from ptxcore.adapt.store import AdaptStore
from ptxcore.agent.llm import LiteLLMClient
from ptxcore.schema import EvaluationStatus as S
from ptxcore.schema import StopReason, TargetInstruction, TrajectoryRecord, text_sha256

from .conftest import add_campaign, turn

MHA, GEMM = "mha_with_lse_d128", "gemm_n7168_k5120"
RECIPE = """\
name: t-fixit
template: fixit
selection:
  source_campaigns: [src]
  source_model: qwen
  problems: [{mha}, {gemm}]
  prompt_variants: [hopper-pack]
  per_problem_cap: 2
  balance: pre
  allow_underfilled: true
teacher:
  model: {{model: replay/adapt-teacher}}
synthesizer:
  model: {{model: replay/adapt-synth-fixit}}
  min_reasoning_chars: 200  # the scripted demo monologues are about 1,000 characters (the demo recipe says so too)
  safety_tokens: 0
export:
  tokenizer: tiktoken:o200k_base
  max_tokens: {budget}
"""


class Counting:
    """The replay client, counting calls (to prove reruns make none)."""

    def __init__(self, model: str) -> None:
        self.inner, self.calls = LiteLLMClient(model), 0

    def complete(self, messages, context):
        self.calls += 1
        return self.inner.complete(messages, context)


def source_turns() -> list:
    a, b, c = "qwen/hopper/hopper-pack/mha/0", "qwen/hopper/hopper-pack/mha/1", "qwen/hopper/hopper-pack/gemm/0"
    return [
        turn("src", a, 0, MHA, S.COMPILE_ERROR), turn("src", a, 1, MHA, S.INCORRECT_NUMERICAL),
        turn("src", a, 2, MHA, S.RUNTIME_ERROR), turn("src", a, 3, MHA, S.EXTRACTION_ERROR, code=None),
        turn("src", a, 4, MHA, S.PASSED, speedup=0.4, target=TargetInstruction.EXECUTED),
        turn("src", b, 0, MHA, S.COMPILE_ERROR, closed=False), turn("src", b, 5, MHA, S.COMPILE_ERROR),
        turn("src", c, 0, GEMM, S.TIMEOUT), turn("src", c, 1, GEMM, S.NOT_EVALUATED),
        turn("src", "other/x", 0, MHA, S.COMPILE_ERROR, model="gemini"),
        turn("src", "qwen/guided", 0, MHA, S.COMPILE_ERROR, variant="hopper-guided"),
        turn("src", "qwen/bwd", 0, "mha_bwd_d64", S.COMPILE_ERROR),
    ]


def ctx_for(wh, budget: int = 65536) -> BuildContext:
    text = RECIPE.format(mha=MHA, gemm=GEMM, budget=budget)
    return BuildContext(build_id="t-fixit", recipe=parse_recipe(text), recipe_text=text, warehouse=str(wh.path))


def simulate_repairs(wh, ctx) -> None:
    """What the campaign machinery records for the planned repair trajectories (fake verdicts)."""
    plan = plan_repair(wh, ctx)
    by_item = {p.trajectory_id.rsplit("fix-", 1)[1]: p for p in plan.plans}
    items = {i.source.turn: i for i in AdaptStore(wh, ctx.build_id).selections() if i.outcome.value == "selected"
             and i.problem == MHA}
    script = {
        by_item[items[0].item_id].trajectory_id: [(S.PASSED, TargetInstruction.EXECUTED, 0.5)],
        by_item[items[1].item_id].trajectory_id: [(S.COMPILE_ERROR, TargetInstruction.UNKNOWN, None),
                                                 (S.PASSED, TargetInstruction.NOT_EXECUTED, 0.3),
                                                 (S.PASSED, TargetInstruction.EXECUTED, 0.2)],
    }
    rid = ctx.repair_campaign_id
    records = []
    for p in plan.plans:
        steps = script.get(p.trajectory_id, [(S.NOT_EVALUATED, TargetInstruction.UNKNOWN, None)])
        records += [turn(rid, p.trajectory_id, n, p.problem, st, model=p.model.model, target=tg, speedup=sp,
                         prompt_sha=plan.prompts[p.trajectory_id].sha256) for n, (st, tg, sp) in enumerate(steps)]
    add_campaign(wh, rid, records)
    wh.upsert_trajectories([TrajectoryRecord(campaign_id=rid, trajectory_id=p.trajectory_id, model=p.model.model,
                                             arch="hopper", prompt_variant=p.prompt_variant, problem=p.problem,
                                             language="cuda", index=p.index, max_turns=5, num_turns=1,
                                             stop_reason=StopReason.TARGET_REACHED) for p in plan.plans])


def built_pairs(wh, ctx=None) -> BuildContext:
    """The source campaign, its selection, the simulated repairs and the pairs (the build up to reasoning)."""
    add_campaign(wh, "src", source_turns())
    ctx = ctx or ctx_for(wh)
    run_select(wh, ctx)
    simulate_repairs(wh, ctx)
    run_pairs(wh, ctx)
    return ctx


def synthesize(wh, ctx, client, counter=None) -> int:
    book = ReasonBook(wh, ctx)
    jobs = book.synthesis_jobs()
    for job in jobs:
        book.record(job, run_job(client, job, ctx.recipe.synthesizer, "replay/adapt-synth-fixit", "now"), counter)
    return len(jobs)


def test_selection_records_every_turn_with_its_first_failed_rule(wh):
    add_campaign(wh, "src", source_turns())
    ctx = ctx_for(wh)
    summary = run_select(wh, ctx)
    outcomes = {(r.source.trajectory_id, r.source.turn): r.outcome.value for r in AdaptStore(wh, ctx.build_id).selections()}
    assert summary.turns_seen == 12 and summary.selected == 3
    assert outcomes[("qwen/hopper/hopper-pack/mha/0", 0)] == "selected"
    assert outcomes[("qwen/hopper/hopper-pack/mha/0", 1)] == "selected"
    assert outcomes[("qwen/hopper/hopper-pack/mha/0", 2)] == "capped"  # largest remainder: ties go to the smaller key
    assert outcomes[("qwen/hopper/hopper-pack/mha/0", 3)] == "not_a_failure"
    assert outcomes[("qwen/hopper/hopper-pack/mha/1", 0)] == "no_closed_fence"
    assert outcomes[("qwen/hopper/hopper-pack/mha/1", 5)] == "outside_turn_window"
    assert outcomes[("qwen/hopper/hopper-pack/gemm/0", 1)] == "not_a_failure"
    assert outcomes[("other/x", 0)] == "wrong_model" and outcomes[("qwen/guided", 0)] == "wrong_variant"
    assert outcomes[("qwen/bwd", 0)] == "out_of_scope"
    build = AdaptStore(wh, ctx.build_id).build()
    assert json.loads(build["selection_json"])["prompt_variants"] == ["hopper-pack"]
    run_select(wh, ctx)  # rerun: same rows, no duplicates
    assert len(AdaptStore(wh, ctx.build_id).selections()) == 12


def test_unknown_campaign_and_empty_selection_say_so(wh):
    ctx = ctx_for(wh)
    with pytest.raises(AdaptError, match="unknown campaign 'src'"):
        run_select(wh, ctx)
    add_campaign(wh, "src", [turn("src", "t", 0, MHA, S.PASSED, speedup=1.0)])
    assert run_select(wh, ctx).refusal == "selection is empty: 0 of 1 source turns qualify (not_a_failure: 1)"
    with pytest.raises(AdaptError, match="run the select step first"):
        plan_repair(wh, ctx)


def test_repair_plan_uses_the_source_prompt_and_the_minimal_change_request(wh):
    add_campaign(wh, "src", source_turns())
    ctx = ctx_for(wh)
    run_select(wh, ctx)
    plan = plan_repair(wh, ctx)
    assert plan.config.id == "t-fixit-repair" and plan.config.turns == 5 and plan.config.target_speedup == 0.15
    assert len(plan.plans) == 3 and all(p.trajectory_id.startswith("replay/adapt-teacher/hopper/hopper-pack/") for p in plan.plans)
    prompt = next(iter(plan.prompts.values()))
    assert "Fix this CUDA kernel with the minimal change" in prompt.user and "Error message:" in prompt.user
    assert '"name": "' in prompt.user  # the task definition is in it
    assert plan_repair(wh, ctx).plans == plan.plans  # deterministic
    assert len(AdaptStore(wh, ctx.build_id).repairs()) == 3
    assert {r.stop_reason for r in AdaptStore(wh, ctx.build_id).repairs()} == {None}  # not run yet


def test_a_repair_row_stored_before_the_stop_reason_enum_reads_as_not_run():
    from ptxcore.adapt.models import RepairRecord

    old = {"build_id": "b", "item_id": "i", "repair_campaign_id": "c", "repair_trajectory_id": "t",
           "prompt_sha256": "p", "stop_reason": "", "num_turns": 0}
    assert RepairRecord.model_validate(old).stop_reason is None
    assert RepairRecord.model_validate({**old, "stop_reason": "max_turns"}).stop_reason is StopReason.MAX_TURNS
    with pytest.raises(ValueError):
        RepairRecord.model_validate({**old, "stop_reason": "gave_up"})


def test_pairs_keep_correct_target_executing_versions_only(wh):
    add_campaign(wh, "src", source_turns())
    ctx = ctx_for(wh)
    run_select(wh, ctx)
    simulate_repairs(wh, ctx)
    assert {r.stop_reason for r in finish_repair(wh, ctx)} == {StopReason.TARGET_REACHED}
    summary = run_pairs(wh, ctx)
    assert summary.pairs == 2 and summary.repairs == 3 and summary.repairs_fixed == 2
    assert summary.statuses == {"kept": 2, "target_not_executed": 1}
    assert summary.repair_turn_statuses["NOT_EVALUATED"] == 1
    for pair in AdaptStore(wh, ctx.build_id).pairs(kept_only=True):
        repair_turn = wh.turns(pair.correct.campaign_id, pair.correct.trajectory_id)[pair.correct.turn]
        assert pair.correct.verdict_sha256 == text_sha256(repair_turn.judge.model_dump_json())
        assert repair_turn.target_instruction is TargetInstruction.EXECUTED


def test_no_pair_when_repairs_were_not_evaluated(wh):
    add_campaign(wh, "src", [turn("src", "t", 0, MHA, S.COMPILE_ERROR)])
    text = RECIPE.format(mha=MHA, gemm=GEMM, budget=65536)
    ctx = BuildContext(build_id="cpu", recipe=parse_recipe(text), recipe_text=text, warehouse=str(wh.path))
    run_select(wh, ctx)
    plan = plan_repair(wh, ctx)
    p = plan.plans[0]
    add_campaign(wh, ctx.repair_campaign_id, [turn(ctx.repair_campaign_id, p.trajectory_id, 0, MHA, S.NOT_EVALUATED,
                                                   model=p.model.model)])
    summary = run_pairs(wh, ctx)
    assert summary.pairs == 0 and "no pairs: none of 1 repairs" in summary.refusal
    assert "NOT_EVALUATED 1)" in summary.refusal and "judged without a GPU" in summary.refusal


def test_reasoning_export_and_reruns(wh, tmp_path, monkeypatch):
    add_campaign(wh, "src", source_turns())
    ctx = ctx_for(wh)
    run_select(wh, ctx)
    simulate_repairs(wh, ctx)
    run_pairs(wh, ctx)
    client = Counting("replay/adapt-synth-fixit")
    assert synthesize(wh, ctx, client) == 2 and client.calls == 2
    assert synthesize(wh, ctx, client) == 0 and client.calls == 2  # rerun: no call repeated
    counter, note = resolve_counter("tiktoken:o200k_base")
    first = run_export(wh, ctx, tmp_path / "out", counter, note)
    again = run_export(wh, ctx, tmp_path / "out", counter, note)
    assert first.rows == 2 and first.parquet_sha256 == again.parquet_sha256
    store = AdaptStore(wh, ctx.build_id)
    assert len(store.rows()) == 2 and len(store.exports()) == 1 and len(store.reasoning()) == 2
    _check_parquet(first.parquet, wh, tmp_path, monkeypatch)
    manifest = json.loads(open(first.manifest).read())
    assert manifest["counts"]["rows"] == 2 and manifest["outputs"]["parquet"]["sha256"] == first.parquet_sha256
    assert [d["reason"] for d in manifest["dropped"]] == ["pair_target_not_executed"]
    assert manifest["tokenizer"]["vocabulary"] == "tiktoken:o200k_base" and manifest["selection"]["per_problem_cap"] == 2
    assert manifest["tokenizer"]["template"] == "qwen3-rules (ours)" and "render -> parse" in manifest["tokenizer"]["round_trip"]
    assert manifest["synthesizer"]["model"] == ctx.recipe.synthesizer.model.model
    assert manifest["teacher"]["model"] == ctx.recipe.teacher.model.model
    from ptxcore.report.recipes import load_manifest
    assert load_manifest(first.manifest).synthesizer == ctx.recipe.synthesizer.model.model
    training = json.loads((tmp_path / "out" / "t-fixit.training.json").read_text())
    assert (training["lora_rank"], training["learning_rate"], training["num_epochs"], training["batch_size"]) == \
        (32, 4.65e-4, 5, 2)
    assert training["lr_schedule"] == "linear" and training["train_on"] == "last_assistant_message"
    assert training["max_length_tokens"] == 65536
    assert training["data"]["files"]["messages"]["sha256"] == first.parquet_sha256
    assert training["data"]["files"]["prompt_completion"]["sha256"] == first.prompt_completion_sha256
    # the paper's optimizer and the authors' save interval (fixit_downstream_process.py: save_every=50)
    assert (training["adam_beta1"], training["adam_beta2"], training["adam_eps"], training["save_every_steps"]) == \
        (0.9, 0.95, 1e-8, 50)
    _check_prompt_completion(first, tmp_path)


def _check_prompt_completion(summary, tmp_path):
    """The TRL form: prompt = every message before the supervised one, completion = the supervised message."""
    import pyarrow.parquet as pq
    from datasets import load_dataset

    ds = load_dataset("parquet", data_files=summary.prompt_completion, split="train", cache_dir=str(tmp_path / "hf2"))
    assert set(ds.column_names) == {"id", "prompt", "completion"}
    by_id = {r["id"]: r for r in pq.read_table(summary.parquet).to_pylist()}
    for row in ds:
        messages = [{"role": m["role"], "content": m["content"]} for m in by_id[row["id"]]["messages"]]
        assert row["prompt"] == messages[:-1] and row["completion"] == messages[-1:]
        assert row["completion"][0]["role"] == "assistant" and len(row["prompt"]) == 4


def _check_parquet(path, wh, tmp_path, monkeypatch):
    import pyarrow.parquet as pq

    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    from datasets import load_dataset

    ds = load_dataset("parquet", data_files=str(path), split="train", cache_dir=str(tmp_path / "hf"))
    table = pq.read_table(path)
    assert ds.num_rows == table.num_rows == 2 and set(ds.column_names) == {"id", "messages", "metadata"}
    for row, arrow_row in zip(ds, table.to_pylist(), strict=True):
        assert row["id"] == arrow_row["id"] and row["id"].startswith(f"t-fixit-{MHA}-")
        assert [m["role"] for m in row["messages"]] == ["system", "user", "assistant", "user", "assistant"]
        assert [m["step_loss_mask"] for m in row["messages"]] == [0, 0, 0, 0, 1]
        final = row["messages"][-1]["content"]
        assert final.startswith("<think>\n") and "\n</think>\n\n```cpp\n" in final and final.endswith("```")
        meta = row["metadata"]
        src = wh.turns(meta["source_campaign_id"], meta["source_trajectory_id"])[meta["source_turn"]]
        assert row["messages"][2]["content"] == src.response_text and row["messages"][3]["content"] == src.feedback
        assert meta["source_kernel_sha256"] == src.kernel_sha256 and meta["source_status"] in ("COMPILE_ERROR",
                                                                                              "INCORRECT_NUMERICAL")
        assert meta["correct_target_instruction"] == "executed" and meta["correct_campaign_id"] == "t-fixit-repair"
        assert meta["correct_recorded_from"] is None  # judged in this build, not reused
        assert meta["reasoning_model"] == "replay/adapt-synth-fixit"
        assert meta["tokenizer"] == "tiktoken:o200k_base + qwen3-rules (ours)" and meta["chat_template"] == "qwen3-rules (ours)"
        for i, key in enumerate(("system_sha256", "task_sha256", "wrong_answer_sha256", "wrong_feedback_sha256")):
            assert meta[key] == text_sha256(row["messages"][i]["content"])
        assert meta["final_message_sha256"] == text_sha256(final)
        assert wh.kernel_text(meta["correct_kernel_sha256"]) in final


def test_over_budget_rows_are_rewritten_to_fit(wh, tmp_path):
    add_campaign(wh, "src", source_turns())
    ctx = ctx_for(wh)
    run_select(wh, ctx)
    simulate_repairs(wh, ctx)
    run_pairs(wh, ctx)
    counter, _ = resolve_counter("tiktoken:o200k_base")
    synthesize(wh, ctx, Counting("replay/adapt-synth-fixit"))
    book = ReasonBook(wh, ctx)
    pair = next(iter(book.pairs.values()))
    chosen = [r for r in AdaptStore(wh, ctx.build_id).reasoning() if r.pair_id == pair.pair_id][0]
    total, _ = book._tokens(pair, chosen, counter)
    fixed, _ = book._tokens(pair, chosen, counter, text="")
    tight = ctx_for(wh, budget=fixed + (total - fixed) * 3 // 4)  # the full monologue no longer fits
    book = ReasonBook(wh, tight)
    jobs, hopeless = book.resynthesis_jobs(counter)
    assert hopeless == [] and len(jobs) >= 1 and all(j.kind.value == "resynthesis" and j.attempt == 1 for j in jobs)
    client = Counting("replay/adapt-synth-fixit")
    done = [book.record(j, run_job(client, j, tight.recipe.synthesizer, "replay/adapt-synth-fixit", "now"), counter)
            for j in jobs]
    assert all(r.status.value == "accepted" for r in done)
    assert book.resynthesis_jobs(counter) == ([], [])  # recorded: never asked again
    out = run_export(wh, tight, tmp_path / "tight", counter)
    rows = AdaptStore(wh, tight.build_id).rows()
    assert out.rows == len([r for r in rows if r["status"] == "kept"]) >= 1
    assert all(json.loads(r["metadata_json"])["reasoning_kind"] == "resynthesis" for r in rows if r["pair_id"] in
               {j.pair_id for j in jobs})


def test_rows_no_rewrite_can_save_are_recorded_and_dropped(wh, tmp_path):
    ctx = built_pairs(wh)
    synthesize(wh, ctx, Counting("replay/adapt-synth-fixit"))
    counter, _ = resolve_counter("tiktoken:o200k_base")
    tiny = ctx_for(wh, budget=1000)  # the system prompt alone is larger
    book = ReasonBook(wh, tiny)
    jobs, hopeless = book.resynthesis_jobs(counter)
    assert jobs == [] and len(hopeless) == 2
    assert all(h.status.value == "over_budget" and "already takes" in h.detail for h in hopeless)
    for h in hopeless:
        book.record(None, h)
    assert book.resynthesis_jobs(counter) == ([], [])
    with pytest.raises(AdaptError, match=r"nothing to export \(over_max_tokens: 2, pair_target_not_executed: 1\)"):
        run_export(wh, tiny, tmp_path / "x", counter)
    assert not (tmp_path / "x" / "t-fixit.parquet").exists()


KG = """\
name: t-kg
template: kernelgen
selection:
  source_campaigns: [gem]
  problems: [{mha}]
  prompt_variants: [hopper-pack]
  source_turns: [0, 7]
  per_problem_cap: null
  balance: none
synthesizer:
  model: {{model: replay/adapt-synth-kernelgen}}
export:
  tokenizer: tiktoken:o200k_base
"""


def test_kernelgen_rows_from_correct_target_executing_turns(wh, tmp_path):
    t = "gemini/hopper/hopper-pack/mha/0"
    add_campaign(wh, "gem", [
        turn("gem", t, 0, MHA, S.COMPILE_ERROR, model="gemini"),
        turn("gem", t, 1, MHA, S.PASSED, model="gemini", speedup=0.3, target=TargetInstruction.ABSENT),
        turn("gem", t, 2, MHA, S.PASSED, model="gemini", speedup=0.0, target=TargetInstruction.EXECUTED),
        turn("gem", t, 3, MHA, S.PASSED, model="gemini", speedup=0.6, target=TargetInstruction.EXECUTED,
             recorded="campaigns/recorded/h200")])
    text = KG.format(mha=MHA)
    ctx = BuildContext(build_id="t-kg", recipe=parse_recipe(text), recipe_text=text, warehouse=str(wh.path))
    summary = run_select(wh, ctx)
    assert summary.selected == 1 and summary.outcomes == {"not_correct": 1, "target_not_executed": 1,
                                                          "below_min_speedup": 1, "selected": 1}
    with pytest.raises(AdaptError, match="no repair step"):
        plan_repair(wh, ctx)
    assert run_pairs(wh, ctx).pairs == 1
    book = ReasonBook(wh, ctx)
    for job in book.synthesis_jobs():
        book.record(job, run_job(LiteLLMClient("replay/adapt-synth-kernelgen"), job, ctx.recipe.synthesizer,
                                 "replay/adapt-synth-kernelgen", "now"))
    counter, _ = resolve_counter("tiktoken:o200k_base")
    out = run_export(wh, ctx, tmp_path / "kg", counter)
    import pyarrow.parquet as pq

    (row,) = pq.read_table(out.parquet).to_pylist()
    src = wh.turns("gem", t)[3]
    assert [m["role"] for m in row["messages"]] == ["system", "user", "assistant"]
    assert [m["step_loss_mask"] for m in row["messages"]] == [0, 0, 1]
    assert row["messages"][2]["content"].endswith(src.response_text.strip())
    assert row["messages"][2]["content"].startswith("<think>\n") and row["metadata"]["wrong_answer_sha256"] is None
    assert row["metadata"]["source_turn"] == row["metadata"]["correct_turn"] == 3
    # a verdict reused from a recorded GPU judgement says so in the row
    assert row["metadata"]["correct_recorded_from"] == row["metadata"]["source_recorded_from"] == \
        "campaigns/recorded/h200"


def test_post_balance_caps_the_pairs_not_the_failures(wh, tmp_path):
    add_campaign(wh, "src", source_turns())
    text = RECIPE.format(mha=MHA, gemm=GEMM, budget=65536).replace("per_problem_cap: 2\n  balance: pre",
                                                                     "per_problem_cap: 1\n  balance: post")
    ctx = BuildContext(build_id="t-fixit", recipe=parse_recipe(text), recipe_text=text, warehouse=str(wh.path))
    assert run_select(wh, ctx).selected == 4  # post-balanced: every qualifying failure is repaired
    simulate_repairs(wh, ctx)
    summary = run_pairs(wh, ctx)
    assert summary.pairs == 1 and summary.statuses == {"kept": 1, "capped": 1, "target_not_executed": 1}
    (kept,) = AdaptStore(wh, ctx.build_id).pairs(kept_only=True)
    assert kept.error_type == "COMPILE_ERROR" and kept.source.turn == 0  # tie: the smaller stratum key
    assert [(b.problem, b.available, b.kept) for b in summary.by_problem] == [(GEMM, 0, 0), (MHA, 2, 1)]
