"""campaigns/generalization.yaml: validates, plans the eleven Figure 6 problems, and the replay library it
names serves each of them the generated kernels of solutions/ (through the real ReplayLibrary loader)."""

from __future__ import annotations

import re

from ptxcore.agent import load_campaign, plan_campaign
from ptxcore.agent.replay import ReplayLibrary
from ptxcore.problems import load_catalog
from research.kernel_models.kernel_source import SOLUTIONS

CAMPAIGN = SOLUTIONS.parent / "campaigns" / "generalization.yaml"


def test_campaign_plans_every_generalization_problem_once():
    config, _ = load_campaign(CAMPAIGN)
    plans = plan_campaign(config)
    generalization = {n for n, p in load_catalog().items() if not p.extension.primary}
    assert len(generalization) == 11
    assert [m.model for m in config.models] == ["replay/generalization"]
    assert sorted(p.problem for p in plans) == sorted(generalization)
    assert config.architectures == ["hopper"] and config.turns == 2


def test_replay_library_serves_the_generated_kernels():
    library = ReplayLibrary(SOLUTIONS.parent / "replay" / "generalization")
    assert library.problems() == {n for n, p in load_catalog().items() if not p.extension.primary}
    for problem in library.problems():
        last = library.response(problem, "hopper", "hopper-pack", 0, 1).response
        (code,) = re.findall(r"```cpp\n(.*?)```", last, re.DOTALL)
        kernels = {p.read_text() for p in (SOLUTIONS / problem).glob("*wgmma*.cu")}
        assert code in kernels, f"{problem}: the last turn is a library wgmma kernel verbatim"


def test_recorded_generalization_verdicts_are_the_library_kernels_judged_on_the_h200():
    """campaigns/recorded/h200-generalization (the 2026-12-01 envelopes): every trace's kernel is a replay turn of
    the generalization library, judged on an H200, and the campaign file names the folder."""
    from ptxcore.problems.traceset import read_traced_verdicts
    from ptxcore.schema import text_sha256

    config, _ = load_campaign(CAMPAIGN)
    assert config.recorded_verdicts is not None and config.recorded_verdicts.endswith("recorded/h200-generalization")
    library = ReplayLibrary(SOLUTIONS.parent / "replay" / "generalization")
    turns = {}
    for problem in library.problems():
        for turn in (0, 1):
            (code,) = re.findall(r"```cpp\n(.*?)```", library.response(problem, "hopper", "hopper-pack", 0, turn).response,
                                 re.DOTALL)
            turns[text_sha256(code)] = problem
    verdicts = read_traced_verdicts(SOLUTIONS.parent / "campaigns" / "recorded" / "h200-generalization")
    assert len(verdicts) == 22
    for v in verdicts:
        assert turns.get(v.kernel_sha256) == v.trace.definition, v.where
        assert v.trace.evaluation.environment.hardware == "NVIDIA H200" and v.arch == "hopper"
    # Every GQA problem has a PASSED, target-executing kernel judged against a recorded FlashInfer version
    # (the two prefill ones from the re-judgement of 18:02-18:13, benchmarks/device/RESULTS.md).
    gqa = {v.trace.definition for v in verdicts if v.trace.definition.startswith("gqa_")
           and v.trace.evaluation.status.value == "PASSED" and v.target_instruction.status.value == "executed"
           and v.trace.evaluation.environment.libs.get("baseline:flashinfer") == "0.7.2.post1"}
    assert gqa == {p for p in library.problems() if p.startswith("gqa_")} and len(gqa) == 3
