"""The adapt replay libraries: the teacher is current with solutions/ and answers exactly the demo's final
kernels (so a verdict recorded for one applies to the other); every scripted monologue passes the rules."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from ptxcore.adapt.reasoning import extract_reasoning, judge_reasoning
from ptxcore.adapt.recipe import SynthesizerSpec
from ptxcore.agent import extract_kernel
from ptxcore.agent.campaign import ModelSpec
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


def test_scripted_monologues_pass_the_acceptance_rules():
    spec = SynthesizerSpec(model=ModelSpec(model="replay/x"))
    fixit, kernelgen = load_library("adapt-synth-fixit"), load_library("adapt-synth-kernelgen")
    assert fixit.problems() == kernelgen.problems() == load_library("demo").problems()
    for lib, indices in ((fixit, range(3)), (kernelgen, range(1))):
        for problem in lib.problems():
            assert len(lib.scripts(problem)) == len(indices)
            for index in indices:
                first = extract_reasoning(lib.response(problem, "hopper", "", index, 0).response)
                rewrite = extract_reasoning(lib.response(problem, "hopper", "", index, 1).response)
                assert judge_reasoning(first, spec, "")[0].value == "accepted"
                assert judge_reasoning(rewrite, spec, "")[0].value == "accepted" and len(rewrite) < len(first)
