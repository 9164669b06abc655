"""The gate's checks made while nvcc runs (ptxcore.compile.early): made only on a pass whose step exited 0, used only
for the very text the gate reads after the build, never following a link; the real build's verdicts unchanged."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from ptxcore.arch import get_architecture
from ptxcore.compile import BuildOptions, CompileCache, compile_candidate
from ptxcore.compile import early as early_module
from ptxcore.compile.early import EarlyChecks, check_pass
from ptxcore.compile.includes import PASS_FILES
from ptxcore.compile.plan import Plan
from ptxcore.compile.toolchain import toolchain
from ptxcore.schema import CompileStatus

HOPPER = BuildOptions(arch=get_architecture("hopper"))
KEEP_INSIDE = "/scratch/keep"
PLAN = Plan(env=(), prelude=(), host=("gcc -E host", "cudafe++ host"),
            device=("gcc -E device", "cicc device", "ptxas device",
                    f"fatbinary --create={KEEP_INSIDE}/kernel.fatbin -64"),
            tail=("gcc -c -x c++ tail",), module_id_file=f"{KEEP_INSIDE}/kernel.module_id")
CLEAN = '# 1 "/scratch/kernel.cu"\nint x;\n'
SPLICED = '# 1 "/scratch/kernel.cu"\n#define S # include "x"\\\nint y;\n'


def _roots():
    return toolchain("hopper").include_roots


def _finish(steps: Path, step: int, rc: int = 0) -> None:
    (steps / f"{step}.rc").write_text(f"{rc}\n")


def _wait_for(predicate, timeout_s: float = 5.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, "the early checks did not happen"
        time.sleep(0.01)


@pytest.fixture
def build_dirs(tmp_path):
    keep, steps = tmp_path / "keep", tmp_path / "steps"
    keep.mkdir()
    steps.mkdir()
    return keep, steps


def _early(keep: Path, steps: Path, handed: list[Path] | None = None) -> EarlyChecks:
    return EarlyChecks(keep, steps, PLAN, KEEP_INSIDE, _roots(), 1 << 20,
                       on_fatbin=None if handed is None else handed.append, poll_s=0.005)


def test_a_pass_is_checked_once_its_step_exited_zero_and_used_for_that_text_only(build_dirs):
    keep, steps = build_dirs
    (keep / PASS_FILES[0]).write_text(CLEAN)
    with _early(keep, steps) as early:
        time.sleep(0.05)
        assert early.check(PASS_FILES[0], CLEAN) is None, "checked before its step ended"
        _finish(steps, 0)
        _wait_for(lambda: early.check(PASS_FILES[0], CLEAN) is not None)
        (keep / PASS_FILES[0]).write_text(SPLICED)  # rewritten after the check: the gate sees the new text
    assert early.check(PASS_FILES[0], CLEAN) == check_pass(CLEAN, _roots())
    assert early.check(PASS_FILES[0], SPLICED) is None
    assert check_pass(SPLICED, _roots()).reason is not None


def test_a_failed_step_and_a_linked_pass_are_not_checked_ahead(build_dirs, tmp_path):
    keep, steps = build_dirs
    outside = tmp_path / "outside.ii"
    outside.write_text(CLEAN)
    (keep / PASS_FILES[0]).write_text(CLEAN)
    os.symlink(outside, keep / PASS_FILES[1])
    with _early(keep, steps) as early:
        _finish(steps, 0, rc=1)
        _finish(steps, 2)
        time.sleep(0.1)
    assert early.check(PASS_FILES[0], CLEAN) is None
    assert early.check(PASS_FILES[1], CLEAN) is None


def test_the_fatbinary_is_handed_on_once_made_and_only_from_the_keep_folder(build_dirs):
    keep, steps = build_dirs
    handed: list[Path] = []
    with _early(keep, steps, handed):
        time.sleep(0.05)
        assert handed == []
        _finish(steps, 5)
        _wait_for(lambda: handed == [keep / "kernel.fatbin"])
    elsewhere = Plan(env=(), prelude=(), host=PLAN.host, device=(*PLAN.device[:3], "fatbinary --create=/etc/x -64"),
                     tail=PLAN.tail, module_id_file=PLAN.module_id_file)
    handed.clear()
    with EarlyChecks(keep, steps, elsewhere, KEEP_INSIDE, _roots(), 1 << 20, on_fatbin=handed.append, poll_s=0.005):
        time.sleep(0.05)
    assert handed == []


def test_a_check_that_raises_is_no_head_start(build_dirs, monkeypatch):
    keep, steps = build_dirs
    (keep / PASS_FILES[0]).write_text(CLEAN)
    monkeypatch.setattr(early_module, "check_pass", lambda text, roots: 1 / 0)
    with _early(keep, steps) as early:
        _finish(steps, 0)
        time.sleep(0.1)
    assert early.check(PASS_FILES[0], CLEAN) is None


def test_real_builds_use_the_early_checks_and_keep_their_verdicts(tmp_path, monkeypatch):
    """A real two-chain build: both passes' early checks are the ones the gate uses; a candidate whose directive
    a later pass would obey is REJECTED as before."""
    used: list[tuple[str, bool]] = []
    real = EarlyChecks.check
    monkeypatch.setattr(EarlyChecks, "check", lambda self, n, t: (r := real(self, n, t), used.append((n, r is not None)))[0])
    ok = compile_candidate(f"__global__ void k(float* x) {{ x[0] = 1.0f; }}\n// {tmp_path.name}\n", HOPPER,
                           CompileCache(tmp_path / "a"))
    assert ok.result.status is CompileStatus.COMPILED, ok.result.log
    assert used == [(PASS_FILES[0], True), (PASS_FILES[1], True)]
    bad = compile_candidate('#define S # include "/etc/passwd"\nS\n__global__ void k(float* x) { x[0] = 1.0f; }\n',
                            HOPPER, CompileCache(tmp_path / "b"))
    assert bad.result.status is CompileStatus.REJECTED, bad.result.log
