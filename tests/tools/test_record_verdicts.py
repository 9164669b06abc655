"""tools/record_verdicts.py: GPU verdict envelopes -> a recorded-verdict set, only for the exact kernel texts judged.

The envelopes are the H200's own (2026-12-01, 16:28-16:32, the generalization batch: tests/fixtures/envelopes/);
the prefill ones there are INFRA_ERROR (FlashInfer missing at that time), the decode one PASSED.
"""

from __future__ import annotations

import json
import os
import runpy
import shutil
from pathlib import Path

import pytest

from ptxcore.problems.traceset import read_traced_verdicts
from ptxcore.schema import text_sha256

REPO = Path(__file__).resolve().parents[2]
MAIN = runpy.run_path(str(REPO / "tools" / "record_verdicts.py"))["main"]
DECODE = "gqa_paged_decode_h24_kv8_d128_ps1"
KERNEL = REPO / "solutions" / DECODE / "wgmma_tma.cu"


@pytest.fixture
def envs(fixtures_dir, tmp_path) -> Path:
    copy = tmp_path / "gen-results"
    shutil.copytree(fixtures_dir / "envelopes" / "h200-2026-12-01e-gqa", copy)
    return copy


def test_only_the_judged_kernel_with_its_exact_text_becomes_a_trace(envs, tmp_path, capsys):
    out = tmp_path / "rec"
    assert MAIN([str(envs), "--kernels", str(KERNEL), "--out", str(out)]) == 0
    (back,) = read_traced_verdicts(out)
    judged = json.loads((envs / f"{DECODE}__wgmma_tma.json").read_text())
    assert back.kernel_sha256 == text_sha256(KERNEL.read_text()) == judged["compile"]["source_sha256"]
    assert back.trace.evaluation.status.value == "PASSED" and back.target_instruction.status.value == "executed"
    assert back.trace.evaluation.performance.speedup_factor == judged["performance"]["speedup_factor"]
    said = capsys.readouterr().out
    assert said.count("skip ") == 4 and "INFRA_ERROR, no GPU verdict to record" in said
    assert "no kernel under --kernels has sha256" in said  # the decode turn-0 kernel was not given


def test_the_kernel_is_found_by_hash_in_the_library_by_default(envs, tmp_path):
    out = tmp_path / "rec"
    assert MAIN([str(envs / f"{DECODE}__wgmma_tma.json"), "--out", str(out)]) == 0  # default: solutions/
    (back,) = read_traced_verdicts(out)
    assert back.kernel_sha256 == text_sha256(KERNEL.read_text())


def test_nothing_recorded_is_exit_1_and_writes_nothing(envs, tmp_path, capsys):
    prefill = next(envs.glob("gqa_paged_prefill*__wgmma_tma.json"))
    assert MAIN([str(prefill), "--out", str(tmp_path / "none")]) == 1
    assert not (tmp_path / "none").exists()
    assert capsys.readouterr().err.strip() == "error: no verdict recorded"


def test_hostile_inputs_are_skipped_or_one_line(envs, tmp_path, capsys):
    """Not JSON, JSON that is no verdict, a kernel file that is not UTF-8, a path that is not there."""
    (envs / "broken.json").write_bytes(b"{\xff not json")
    (envs / "other.json").write_text('{"status": "PASSED"}')
    kernels = tmp_path / "kernels"
    kernels.mkdir()
    shutil.copy(KERNEL, kernels / "k.cu")
    (kernels / "binary.cu").write_bytes(b"\xff\xfe\x00")
    out = tmp_path / "rec"
    assert MAIN([str(envs), "--kernels", str(kernels), "--out", str(out)]) == 0
    said = capsys.readouterr().out
    assert "skip " + str(envs / "broken.json") + ": not a verdict envelope" in said
    assert "skip " + str(envs / "other.json") + ": not a verdict envelope" in said
    assert len(read_traced_verdicts(out)) == 1
    assert MAIN([str(tmp_path / "missing"), "--out", str(tmp_path / "x")]) == 2
    assert capsys.readouterr().err.strip() == f"error: {tmp_path / 'missing'}: no such file or folder"


def test_check_says_whether_a_set_is_current(envs, tmp_path, capsys):
    out = tmp_path / "rec"
    args = [str(envs), "--kernels", str(KERNEL), "--out", str(out), "--judged-at", "2026-12-01T16:29:00+00:00"]
    assert MAIN(args) == 0
    assert MAIN([*args, "--check"]) == 0 and capsys.readouterr().out.endswith("up to date\n")
    trace = next(out.rglob("*.jsonl"))
    trace.write_text(trace.read_text().replace("PASSED", "INCORRECT_NUMERICAL"))
    assert MAIN([*args, "--check"]) == 1 and "is stale: rebuild it" in capsys.readouterr().out


def test_a_judged_at_stamp_beside_the_envelope_dates_the_trace(envs, tmp_path):
    """benchmarks/device/judge_batch.py writes kernels/<name>.judged_at beside its envelopes."""
    (envs / "kernels").mkdir()
    shutil.copy(KERNEL, envs / "kernels" / f"{DECODE}__wgmma_tma.cu")
    (envs / "kernels" / f"{DECODE}__wgmma_tma.judged_at").write_text("2026-12-01T16:29:07+00:00\n")
    os.utime(envs / f"{DECODE}__wgmma_tma.json", (0, 0))
    out = tmp_path / "rec"
    assert MAIN([str(envs), "--out", str(out)]) == 0  # default kernels: solutions/ and envs/kernels/
    (back,) = read_traced_verdicts(out)
    assert back.trace.evaluation.timestamp == "2026-12-01T16:29:07+00:00"
