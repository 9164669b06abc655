"""benchmarks/tool_phases.py: the table and the splits from hand-written run times (test inputs, not
measurements), and one arm run for real in the stage sandbox (the interpreter arm needs no GPU)."""

from __future__ import annotations

import sys

from tests.scripts import load_script

from .test_env_steps import REPO


def _load():
    sys.path.insert(0, str(REPO / "benchmarks"))
    return load_script(REPO / "benchmarks" / "tool_phases.py", "tool_phases")


def _runs(tp, seconds: dict[str, list[float]]):
    return [tp.Run(arm, s, True) for arm, xs in seconds.items() for s in xs]


def test_the_splits_are_differences_of_medians_in_the_judges_order():
    tp = _load()
    runs = _runs(tp, {"interpreter": [0.05, 0.04, 0.06], "imports": [2.0, 2.2, 2.1], "cuda": [2.6, 2.5, 2.7],
                      "child": [3.0, 3.1, 2.9], "memcheck": [5.0, 5.2, 5.4], "ncu": [7.0, 6.8, 7.2],
                      "memcheck | ncu": [7.5, 7.4, 7.6]})
    stats = tp.summary(runs)
    assert stats["imports"] == {"n": 3, "failed": 0, "median": 2.1, "min": 2.0, "max": 2.2}
    got = dict(tp.splits(stats))
    assert abs(got["the child's imports"] - 2.05) < 1e-9
    assert abs(got["memcheck's own cost"] - 2.2) < 1e-9
    assert abs(got["ncu's own cost"] - 4.0) < 1e-9
    assert abs(got["the pair beyond the longer tool"] - 0.5) < 1e-9
    text = tp.render(stats)
    assert "| memcheck | ncu | 3 | 0 | 7.50 | 7.40 | 7.60 |" in text
    assert text.index("| interpreter |") < text.index("| ncu | 3 |")


def test_a_failed_run_is_counted_and_kept_out_of_the_medians_and_splits():
    tp = _load()
    runs = [tp.Run("child", 3.0, True), tp.Run("memcheck", 0.5, False, "exit 17"), tp.Run("ncu", 7.0, True)]
    stats = tp.summary(runs)
    assert stats["memcheck"] == {"n": 0, "failed": 1}
    labels = [label for label, _ in tp.splits(stats)]
    assert "memcheck's own cost" not in labels and "ncu's own cost" in labels
    assert "| memcheck | 0 | 1 | - | - | - |" in tp.render(stats)


def test_an_arm_runs_in_the_candidates_stage_sandbox(tmp_path):
    tp = _load()
    lib = tmp_path / "candidate.so"
    lib.write_bytes(b"\x7fELF")
    seen = []

    def argv(inside):
        seen.append(inside)
        return [sys.executable, "-c", f"import os, sys; sys.exit(0 if os.path.isfile({str(inside)!r}) else 5)"]

    run = tp._timed("interpreter", "memcheck", lib, argv, 60.0, lambda o: o.exit_code == 0)
    assert run.ok, run.note
    assert seen and seen[0] != lib  # the stage's copy, not the host's file
    bad = tp._timed("interpreter", "ncu", lib, lambda _p: [sys.executable, "-c", "raise SystemExit(4)"], 60.0,
                    lambda o: o.exit_code == 0)
    assert not bad.ok and "exit 4" in bad.note


def test_each_tools_start_and_context_split_from_its_own_imports_and_cuda_arms():
    tp = _load()
    runs = _runs(tp, {"memcheck": [5.0], "ncu": [7.0], "memcheck: imports": [2.5], "memcheck: cuda": [3.5],
                      "ncu: imports": [3.0], "ncu: cuda": [4.5]})
    got = dict(tp.splits(tp.summary(runs)))
    assert abs(got["memcheck's start (tool, interpreter, imports)"] - 2.5) < 1e-9
    assert abs(got["memcheck's CUDA context"] - 1.0) < 1e-9
    assert abs(got["memcheck after its CUDA context"] - 1.5) < 1e-9
    assert abs(got["ncu's CUDA context"] - 1.5) < 1e-9
    assert abs(got["ncu after its CUDA context"] - 2.5) < 1e-9
