"""The feedback augmenter: which turns retrieve, the note budget, the ORACLE condition, the agent loop hook."""

from __future__ import annotations

from ptxcore.adapt.retrieval import RepairNotesIndex, RepairRetrievalAugmenter
from ptxcore.agent import AgentConfig, CallContext, MiniPTXAgent
from ptxcore.agent.records import turn_record
from ptxcore.agent.retrieval_spec import RepairRetrievalSpec
from ptxcore.agent.types import TurnEvaluation
from ptxcore.schema import AugmentationStatus, EvaluationStatus, ItemKind, RetrievalCondition, text_sha256
from tests.agent.fakes import FakeEvaluator, FakeLLM, failed, passed

from .notes_data import WGMMA_FIXED, WGMMA_WRONG, corpus, note, record

CTX = CallContext(problem="mha_with_lse_d128", arch="hopper", prompt_variant="hopper-pack")


def augmenter(mode: str, records=None, **spec) -> RepairRetrievalAugmenter:
    s = RepairRetrievalSpec(mode=mode, notes="notes.jsonl" if mode != "none" else None, **spec)
    return RepairRetrievalAugmenter(s, RepairNotesIndex(records or corpus()) if mode != "none" else None,
                                    source="notes.jsonl")


def test_notes_mode_on_a_failing_turn():
    out = augmenter("notes").augment(WGMMA_WRONG, failed(), CTX)
    rec = out.record
    assert rec.condition is RetrievalCondition.NOTES and rec.status is AugmentationStatus.APPENDED and not rec.oracle
    assert out.text.startswith("## Repair notes from similar earlier wrong kernels")
    assert rec.appended_chars == len(out.text) + 1 and rec.source == "notes.jsonl" and rec.source_sha256
    kinds = [(i.kind, i.rank) for i in rec.items]
    # group 1 (p1 + p2: 3 + 2 notes, one shared) then group 2 (p3: 1 note); de-duplicated: 4 + 1
    assert kinds == [(ItemKind.GROUP, 1)] + [(ItemKind.NOTE, 1)] * 4 + [(ItemKind.GROUP, 2), (ItemKind.NOTE, 2)]
    assert [i.pair_id for i in rec.items if i.kind is ItemKind.NOTE] == ["p1", "p1", "p1", "p2", "p3"]
    assert out.text.count("wgmma.fence.sync.aligned\n") == 1  # shared note shown once
    assert "1. wgmma.fence.sync.aligned" in out.text and "5. __shfl_xor_sync result" in out.text
    assert "Required sequence:" in out.text and WGMMA_FIXED not in out.text  # notes only, no solution


def test_at_most_max_notes_and_top_k_groups():
    many = [record(f"q{i}", "mha_with_lse_d128", WGMMA_WRONG + f"\nint extra_{i};\n", WGMMA_FIXED,
                   [note(f"instr {i}.{j}") for j in range(4)]) for i in range(6)]
    out = augmenter("notes", many).augment(WGMMA_WRONG, failed(), CTX)
    notes = [i for i in out.record.items if i.kind is ItemKind.NOTE]
    groups = [i for i in out.record.items if i.kind is ItemKind.GROUP]
    assert len(notes) == 8 and len(groups) == 2 and out.text.count("\n8. instr") == 1
    small = augmenter("notes", many, max_notes=3, top_k_groups=1).augment(WGMMA_WRONG, failed(), CTX)
    assert [i.kind for i in small.record.items] == [ItemKind.GROUP] + [ItemKind.NOTE] * 3
    wide = augmenter("notes", many, max_notes=32).augment(WGMMA_WRONG, failed(), CTX)
    assert sum(i.kind is ItemKind.GROUP for i in wide.record.items) == 3  # top 3 groups by default


def test_notes_plus_fixed_is_the_oracle_and_shows_the_best_fix():
    out = augmenter("notes+fixed").augment(WGMMA_WRONG, failed(EvaluationStatus.COMPILE_ERROR), CTX)
    rec = out.record
    assert rec.condition is RetrievalCondition.NOTES_FIXED and rec.oracle
    assert rec.condition.label == "notes+fixed (ORACLE)"
    fixed = [i for i in rec.items if i.kind is ItemKind.FIXED_KERNEL]
    assert fixed[0].ref == text_sha256(WGMMA_FIXED) and fixed[0].pair_id == "p1"  # 0.4x beats 0.1x
    assert WGMMA_FIXED.rstrip() in out.text and "best fix speedup 0.400x" in out.text
    assert sum(i.kind is ItemKind.NOTE for i in rec.items) <= 8


def test_turns_that_retrieve_nothing_still_record_the_condition():
    aug = augmenter("notes")
    assert aug.augment(None, TurnEvaluation(status=EvaluationStatus.EXTRACTION_ERROR), CTX).record.status \
        is AugmentationStatus.NO_KERNEL
    for ev in (passed(0.5), TurnEvaluation(status=EvaluationStatus.NOT_EVALUATED),
               TurnEvaluation(status=EvaluationStatus.INFRA_ERROR)):
        out = aug.augment(WGMMA_WRONG, ev, CTX)
        assert out.text == "" and out.record.status is AugmentationStatus.NOT_FAILING
    miss = aug.augment("qqq_only zzz_words;", failed(), CTX)
    assert miss.text == "" and miss.record.status is AugmentationStatus.NO_MATCH
    off = augmenter("none").augment(WGMMA_WRONG, failed(), CTX)
    assert off.text == "" and off.record.condition is RetrievalCondition.NONE
    assert off.record.status is AugmentationStatus.DISABLED


def test_the_loop_appends_to_failing_feedback_and_records_it():
    answer = f"Try.\n```cpp\n{WGMMA_WRONG}```\n"
    llm = FakeLLM([answer])
    agent = MiniPTXAgent(llm, FakeEvaluator([failed(), passed(0.3)]), AgentConfig(max_turns=3, target_speedup=0.25),
                         augmenter=augmenter("notes"))
    seen = []
    result = agent.run("sys", "task", CTX, observer=seen.append)
    first, second = result.outcomes
    assert first.feedback.startswith("Status: INCORRECT_NUMERICAL") and "## Repair notes" in first.feedback
    assert first.augmentation.status is AugmentationStatus.APPENDED and first.augmentation.n_notes == 5
    assert second.augmentation.status is AugmentationStatus.NOT_FAILING and "Repair notes" not in second.feedback
    assert "## Repair notes" in llm.calls[1][0][-1]["content"]  # the model saw the notes on its next call
    plain = MiniPTXAgent(FakeLLM([answer]), FakeEvaluator([failed()]), AgentConfig(max_turns=1)).run("s", "t", CTX)
    assert plain.outcomes[0].augmentation is None and "Repair notes" not in plain.outcomes[0].feedback


def test_turn_record_carries_the_augmentation(tmp_path):
    from ptxcore.agent import ModelSpec
    from ptxcore.agent.plan import TrajectoryPlan
    from ptxcore.schema import Language
    from ptxcore.warehouse import Warehouse

    answer = f"Try.\n```cpp\n{WGMMA_WRONG}```\n"
    agent = MiniPTXAgent(FakeLLM([answer]), FakeEvaluator([failed()]), AgentConfig(max_turns=2),
                         augmenter=augmenter("notes+fixed"))
    result = agent.run("sys", "task", CTX)
    plan = TrajectoryPlan(campaign_id="c", trajectory_id="t", model=ModelSpec(model="replay/x"), arch="hopper",
                          prompt_variant="hopper-pack", problem="mha_with_lse_d128", index=0,
                          language=Language.CUDA, agent=AgentConfig(max_turns=2))
    records = [turn_record(plan, o, "0" * 64) for o in result.outcomes]
    with Warehouse(tmp_path / "w.duckdb") as wh:
        wh.upsert_turns(records)
        assert wh.turns("c") == records  # reads back equal, augmentation included
        _, rows = wh.sql("SELECT turn, condition, status, n_groups, n_notes, n_fixed_kernels FROM turn_augmentations "
                         "ORDER BY turn")
        assert rows[0][:3] == (0, "notes+fixed", "appended") and rows[0][3] == rows[0][5] >= 1
        wh.upsert_turns([records[0].model_copy(update={"augmentation": None})])  # replaced: row goes too
        assert wh.sql("SELECT count(*) FROM turn_augmentations WHERE turn = 0")[1] == [(0,)]
