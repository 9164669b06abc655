"""Schema v1 -> v2: real H200 verdicts written by v1 read back typed, and export exactly what v1 exported."""

from __future__ import annotations

import json

import pytest

from ptxcore.problems import get_problem
from ptxcore.schema import EnvironmentInfo, EvaluationStatus, JudgeResult, TurnRecord
from ptxcore.warehouse.interchange import solution_of, trace_of


def _v1_results(fixtures_dir):
    path = fixtures_dir / "interchange" / "judge_results_h200_v1.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def test_v1_results_migrate_to_typed_fields(fixtures_dir):
    raw = _v1_results(fixtures_dir)
    passed = next(d for d in raw if d["status"] == "PASSED" and d["definition"] == "gemm_n7168_k5120"
                  and d["target_instruction"]["status"] == "executed")
    r = JudgeResult.model_validate(passed)
    assert r.correctness.stats.timed_calls_verified == passed["correctness"]["extra"]["timed_calls_verified"]
    assert r.correctness.stats.allclose is passed["correctness"]["extra"]["allclose"]
    env = passed["environment"]["extra"]
    assert r.environment.library_versions["cupy"] == env["cupy"]
    assert r.environment.trial_medians_ms == [float(x) for x in env["trial_medians_ms"].split(",")]
    assert r.environment.env_stream_ids == [int(env["env_stream_ids"])]
    assert r.environment.persisting_l2_resets == int(env["persisting_l2_resets"])


def test_v1_export_is_byte_identical(fixtures_dir):
    """The FlashInfer-Trace lines the v1 exporter wrote for these verdicts (golden file) are reproduced."""
    golden = (fixtures_dir / "interchange" / "traces_h200_v1.jsonl").read_text().splitlines()
    raw = _v1_results(fixtures_dir)
    assert len(golden) == len(raw) == 24
    for i, (d, want) in enumerate(zip(raw, golden, strict=True)):
        jr = JudgeResult.model_validate(d)
        rec = TurnRecord(campaign_id="golden", trajectory_id=f"t{i}", turn=0, model="replay/golden", arch="hopper",
                         gpu=jr.environment.gpu_name, prompt_variant="hopper-pack", problem=jr.definition,
                         kernel_text=f"// kernel {i}\n", status=jr.status, judge=jr,
                         created_at="2026-12-01T09:40:00+00:00")
        assert trace_of(rec, get_problem(rec.problem), solution_of(rec)).model_dump_json() == want


def test_v1_unmeasured_zeros_and_empty_strings_become_none():
    env = EnvironmentInfo.model_validate({"gpu_name": "", "sm_clock_mhz_before": 0, "temperature_c_after": 0,
                                          "extra": {}})
    assert env.gpu_name is None and env.sm_clock_mhz_before is None and env.temperature_c_after is None
    assert TurnRecord(campaign_id="c", trajectory_id="t", turn=0, model="m", arch="hopper", gpu="",
                      prompt_variant="v", problem="p", status=EvaluationStatus.NOT_EVALUATED).gpu is None


@pytest.mark.parametrize("status,correctness,performance,ok", [
    ("PASSED", True, True, True),
    ("PASSED", True, False, False),
    ("PASSED", False, True, False),
    ("INCORRECT_NUMERICAL", True, False, True),
    ("INCORRECT_NUMERICAL", False, False, False),
    ("INCORRECT_NUMERICAL", True, True, False),
    ("REWARD_HACK", True, False, True),
    ("RUNTIME_ERROR", False, False, True),
    ("RUNTIME_ERROR", False, True, False),
    ("COMPILE_ERROR", True, False, False),
    ("REJECTED", True, False, True),  # a library found mapped at run time, after compared calls
    ("EXTRACTION_ERROR", True, False, False),
    ("NOT_EVALUATED", True, False, False),
])
def test_status_invariants(status, correctness, performance, ok):
    fields = {"status": status, "definition": "gemm_n7168_k5120", "arch": "hopper",
              "target_instruction": {"status": "unknown"}}
    if correctness:
        fields["correctness"] = {"max_relative_error": 0.0, "max_absolute_error": 0.0}
    if performance:
        fields["performance"] = {"latency_ms": 1.0, "reference_latency_ms": 1.0, "speedup_factor": 1.0}
    if ok:
        assert JudgeResult.model_validate(fields).status.value == status
    else:
        with pytest.raises(ValueError):
            JudgeResult.model_validate(fields)


def test_v2_fields_given_in_code_are_kept():
    """Keyword arguments are v2 already: nothing of them may be taken for v1 and dropped."""
    env = EnvironmentInfo(gpu_name="NVIDIA H200", library_versions={"cupy": "14.2.0", "baseline:cudnn": "91900"},
                          trial_medians_ms=[0.84], persisting_l2_resets=0, sm_clock_mhz_before=0)
    assert env.library_versions == {"cupy": "14.2.0", "baseline:cudnn": "91900"}
    assert env.trial_medians_ms == [0.84] and env.persisting_l2_resets == 0 and env.sm_clock_mhz_before == 0
    assert EnvironmentInfo.model_validate_json(env.model_dump_json()) == env
