"""tools/run_solutions.sh with a stand-in `ptxbench` on PATH (a test double that prints a fixed envelope; no
judge runs): envelopes are written whole or not at all, and --resume goes on where a cut-off run stopped."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path

from tests.waiting import wait_for

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "tools" / "run_solutions.sh"
KERNELS = sorted((REPO / "solutions").glob("*/*.cu"))

FAKE = """#!/usr/bin/env bash
# test double for `ptxbench eval KERNEL --problem P ... --json`: logs the kernel, prints an envelope
echo "$2" >> "$FAKE_LOG"
case "$2" in *"$FAKE_STALL"*) [ -n "$FAKE_STALL" ] && { echo -n '{"status": '; sleep 60; } ;; esac
echo '{"status": "PASSED", "target_instruction": {"status": "absent"}}'
"""


def _env(tmp_path: Path, stall: str = "") -> dict:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    fake = bin_dir / "ptxbench"
    fake.write_text(FAKE)
    fake.chmod(0o755)
    return {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "FAKE_LOG": str(tmp_path / "calls.log"),
            "FAKE_STALL": stall}


def _calls(tmp_path: Path) -> list[str]:
    log = tmp_path / "calls.log"
    return log.read_text().split() if log.exists() else []


def test_a_cut_off_run_leaves_no_half_envelope_and_resume_goes_on(tmp_path):
    out = tmp_path / "sol"
    stalled = KERNELS[2]
    proc = subprocess.Popen(["bash", str(SCRIPT), str(out)], env=_env(tmp_path, stall=str(stalled)),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    part = out / f"{stalled.parent.name}__{stalled.stem}.json.part"
    try:
        wait_for(lambda: part.exists() and part.read_text().startswith('{"status"'), 60, "the stalled eval")
    finally:
        os.killpg(proc.pid, signal.SIGKILL)  # what a stage's time limit does
        proc.communicate()
    done = sorted(out.glob("*.json"))
    assert len(done) == 2 and all(json.loads(p.read_text())["status"] == "PASSED" for p in done)
    assert part.exists() and not part.with_suffix("").exists()  # the cut-off one: a .part, never an empty .json

    (tmp_path / "calls.log").unlink()
    r = subprocess.run(["bash", str(SCRIPT), str(out), "--resume"], env=_env(tmp_path), capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.count("already judged") == 2
    assert _calls(tmp_path) == [str(k) for k in KERNELS[2:]]  # only what was not judged yet
    assert len(list(out.glob("*.json"))) == len(KERNELS)
