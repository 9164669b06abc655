"""A forged-timing verdict stands only when no process outside the judge held the GPU (the meter is device-wide)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from ptxcore.gpu.errors import InfraError
from ptxcore.gpu.harness.sharing import foreign_pids, shared_gpu
from ptxcore.sandbox.process import descendants

FORGED = "forged its timing: the candidate's process reported 0.07 ms per call, but ..."


def fake_proc(tmp_path: Path, tree: dict[int, int]) -> Path:
    """A /proc with `pid -> ppid` entries (the command name holds a space and a parenthesis, as real ones can)."""
    for pid, ppid in tree.items():
        (tmp_path / str(pid)).mkdir()
        (tmp_path / str(pid) / "stat").write_text(f"{pid} (odd) name) S {ppid} 1 1 0 -1\n")
    (tmp_path / "self").mkdir()
    return tmp_path


def test_the_judge_and_everything_below_it_are_ours(tmp_path):
    proc = fake_proc(tmp_path, {1: 0, 100: 1, 101: 100, 102: 101, 103: 102, 200: 1})
    assert set(descendants([100], proc)) == {100, 101, 102, 103}
    assert foreign_pids({101, 103, 200}, 100, proc) == [200]
    assert foreign_pids(None, 100, proc) == [] and foreign_pids(set(), 100, proc) == []


def test_a_forged_verdict_with_another_job_on_the_gpu_is_inconclusive(tmp_path):
    proc = fake_proc(tmp_path, {1: 0, 100: 1, 101: 100, 200: 1})
    with pytest.raises(InfraError, match=r"cannot conclude: process\(es\) 200 outside the judge"):
        shared_gpu(FORGED, lambda: {101, 200}, 100, proc)
    shared_gpu(FORGED, lambda: {100, 101}, 100, proc)  # only the judge and its candidate: the verdict stands
    shared_gpu(FORGED, lambda: None, 100, proc)  # NVML cannot say: the verdict stands


def test_a_real_child_is_found_below_this_process():
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        assert child.pid in descendants([os.getpid()])
        assert foreign_pids({child.pid, os.getpid()}) == []
    finally:
        child.kill()
        child.wait()
