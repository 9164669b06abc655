"""The replay libraries replay/demo/ and replay/generalization/: up to date with their spec, well formed,
and each turn compiles (or fails to) as its role says. COMPILE_ERROR turns must really fail in nvcc/ptxas here; the other roles
are verdicts of the GPU judge and are only required to compile, with the stated static target status.
"""

from __future__ import annotations

import re

import pytest
import yaml

from ptxcore.arch import get_architecture
from ptxcore.compile import BuildOptions, CompileCache, compile_candidate
from ptxcore.problems import load_catalog
from ptxcore.schema import CompileStatus, StaticTarget
from research.kernel_models.kernel_source import SOLUTIONS
from tests.scripts import load_script

HOPPER = BuildOptions(arch=get_architecture("hopper"))
CPP_BLOCK = re.compile(r"```cpp\n(.*?)```", re.DOTALL)


BUILDER = load_script(SOLUTIONS.parent / "tools" / "build_replay.py", "build_replay")
SPEC = BUILDER.load_spec()
TURNS = [
    (library, t.problem, i, turn)
    for library, trajectories in SPEC.LIBRARIES.items()
    for t in trajectories
    for i, turn in enumerate(t.turns)
]
IDS = [f"{lib}-{p}-turn{i}-{turn.expect}" for lib, p, i, turn in TURNS]


def test_yaml_files_are_up_to_date():
    assert BUILDER.main(["--check"]) == 0, "run: python tools/build_replay.py"


def test_one_trajectory_per_primary_problem_with_the_required_states():
    catalog = load_catalog()
    problems = [t.problem for t in SPEC.TRAJECTORIES]
    assert sorted(problems) == sorted(n for n, p in catalog.items() if p.extension.primary)
    for t in SPEC.TRAJECTORIES:
        roles = [(turn.expect, turn.target) for turn in t.turns]
        assert roles[0][0] == "COMPILE_ERROR"
        assert {"RUNTIME_ERROR", "INCORRECT_NUMERICAL"} <= {e for e, _ in roles}
        assert ("PASSED", False) in roles, f"{t.problem}: no correct generic kernel"
        assert roles[-1] == ("PASSED", True), f"{t.problem}: must end on a correct target-path kernel"


def test_one_trajectory_per_generalization_problem_ending_on_the_target_path():
    catalog = load_catalog()
    problems = [t.problem for t in SPEC.GENERALIZATION]
    assert sorted(problems) == sorted(n for n, p in catalog.items() if not p.extension.primary)
    assert len(problems) == 11
    for t in SPEC.GENERALIZATION:
        assert t.turns[-1].expect == "PASSED" and t.turns[-1].target is True, t.problem
        assert all(turn.base.startswith(f"{t.problem}/") for turn in t.turns), "turns use the problem's kernels"


LIBRARY_FILES = sorted((SOLUTIONS.parent / "replay").glob("[dg]*/*.yaml"))


@pytest.mark.parametrize("path", LIBRARY_FILES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_yaml_shape(path):
    doc = yaml.safe_load(path.read_text())
    assert set(doc) == {"problem", "arch", "language", "description", "turns"}
    assert doc["arch"] == "hopper" and doc["language"] == "cuda" and path.stem == doc["problem"]
    assert len(doc["turns"]) >= (5 if path.parent.name == "demo" else 2)
    for turn in doc["turns"]:
        assert set(turn) == {"response"}
        blocks = CPP_BLOCK.findall(turn["response"])
        assert len(blocks) == 1, "one ```cpp block per response"
        reasoning = turn["response"].split("```cpp")[0].strip()
        assert 40 <= len(reasoning) <= 1200, "a brief reasoning before the code"


@pytest.mark.parametrize("library,problem,index,turn", TURNS, ids=IDS)
def test_turn_kernel_matches_the_spec(library, problem, index, turn):
    doc = yaml.safe_load((SOLUTIONS.parent / "replay" / library / f"{problem}.yaml").read_text())
    (code,) = CPP_BLOCK.findall(doc["turns"][index]["response"])
    assert code == BUILDER.turn_source(turn)
    if turn.expect == "PASSED":
        assert code == (SOLUTIONS / turn.base).read_text(), "a PASSED turn is a library solution verbatim"
    else:
        assert code != (SOLUTIONS / turn.base).read_text(), "a failing turn differs from the solution"


@pytest.mark.slow
@pytest.mark.parametrize("library,problem,index,turn", TURNS, ids=IDS)
def test_turn_compiles_as_its_role_says(library, problem, index, turn):
    compiled = compile_candidate(BUILDER.turn_source(turn), HOPPER, CompileCache())
    if turn.expect == "COMPILE_ERROR":
        assert compiled.result.status is CompileStatus.COMPILE_ERROR
        assert "error" in compiled.result.log
        return
    assert compiled.result.status is CompileStatus.COMPILED, compiled.result.log
    expected = StaticTarget.PRESENT if turn.target else StaticTarget.ABSENT
    assert compiled.sass.target_static is expected
