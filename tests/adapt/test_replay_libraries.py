"""The adapt replay libraries: the teacher is current with solutions/ and answers exactly the demo's final
kernels (so a verdict recorded for one applies to the other); every scripted monologue passes the rules."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from ptxcore.adapt import load_recipe
from ptxcore.adapt.reasoning import extract_reasoning, judge_reasoning, judge_rewrite
from ptxcore.agent import extract_kernel
from ptxcore.agent.replay import load_library

REPO = Path(__file__).resolve().parents[2]


def test_teacher_library_is_current_and_matches_the_demo_final_turns():
    proc = subprocess.run([sys.executable, "tools/build_adapt_teacher.py", "--check"], cwd=REPO,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    teacher, demo = load_library("adapt-teacher"), load_library("demo")
    assert teacher.problems() == demo.problems()
    for problem in teacher.problems():
        fixed = extract_kernel(teacher.response(problem, "hopper", "", 0, 0).response).code
        final = extract_kernel(demo.response(problem, "hopper", "", 0, 4).response).code
        assert fixed is not None and fixed == final


def test_scripted_monologues_pass_the_demo_recipes_rules():
    """The scripted monologues are about 1,000 characters: the demo Fixit recipe says it lowers the authors' 2,000."""
    fixit, kernelgen = load_library("adapt-synth-fixit"), load_library("adapt-synth-kernelgen")
    assert fixit.problems() == kernelgen.problems() == load_library("demo").problems()
    for lib, name, indices in ((fixit, "demo-fixit", range(3)), (kernelgen, "demo-kernelgen", range(1))):
        recipe, text = load_recipe(REPO / "campaigns" / "adapt" / f"{name}.yaml")
        spec = recipe.synthesizer
        if name == "demo-fixit":
            assert spec.min_chars(recipe.template) == 200 and "2,000" in text
        for problem in lib.problems():
            assert len(lib.scripts(problem)) == len(indices)
            for index in indices:
                first = extract_reasoning(lib.response(problem, "hopper", "", index, 0).response)
                rewrite = extract_reasoning(lib.response(problem, "hopper", "", index, 1).response)
                assert judge_reasoning(first, spec, "", recipe.template)[0].value == "accepted"
                assert judge_rewrite(rewrite, "")[0].value == "accepted" and len(rewrite) < len(first)


def test_scripted_notes_teacher_answers_parse_for_every_demo_failure():
    """replay/adapt-notes: one notes answer per demo failing turn (index = the wrong turn), each a valid notes object."""
    from ptxcore.adapt.retrieval import parse_notes

    notes = load_library("adapt-notes")
    assert notes.problems() == load_library("demo").problems()
    for problem in notes.problems():
        assert len(notes.scripts(problem)) == 3
        for index in range(3):
            parsed = parse_notes(notes.response(problem, "hopper", "repair-notes", index, 0).response)
            assert parsed.instruction_notes and parsed.summary


def test_every_teacher_kernel_has_a_recorded_h200_verdict_and_the_adapt_run_agrees(tmp_path):
    """The demo repairs get recorded verdicts on a CPU machine only because each teacher kernel (by sha256) was judged
    on the H200: PASSED with its target instructions executed (campaigns/recorded/h200). The H200 adapt run
    (its warehouse's three live repair turns, tests/fixtures/envelopes/h200-2026-12-01f-adapt-repairs.json, read from
    the run's archive) judged the repair turns it ran live; each has the same kernel hash and verdict as the
    recorded one."""
    import json

    from ptxcore.problems.traceset import read_traced_verdicts
    from ptxcore.schema import text_sha256
    recorded = {(v.kernel_sha256, v.trace.definition): v for v in read_traced_verdicts(REPO / "campaigns/recorded/h200")}
    teacher = load_library("adapt-teacher")
    for problem in teacher.problems():
        sha = text_sha256(extract_kernel(teacher.response(problem, "hopper", "", 0, 0).response).code)
        v = recorded[(sha, problem)]
        assert v.trace.evaluation.status.value == "PASSED" and v.target_instruction.status.value == "executed"
        assert v.trace.evaluation.environment.hardware == "NVIDIA H200"
    live = json.loads((REPO / "tests/fixtures/envelopes/h200-2026-12-01f-adapt-repairs.json").read_text())["turns"]
    assert len(live) == 3
    for t in live:
        v = recorded[(t["kernel_sha256"], t["problem"])]
        assert t["status"] == v.trace.evaluation.status.value == "PASSED"
        assert t["target_instruction"] == v.target_instruction.status.value == "executed"
        assert t["gpu_name"] == "NVIDIA H200" and abs(t["speedup"] - v.trace.evaluation.performance.speedup_factor) < 0.01
