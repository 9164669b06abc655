"""Schema: FlashInfer-Trace-shaped documents and our records survive a JSON round trip unchanged."""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

from ptxcore.schema import (
    SCHEMA_VERSION,
    CampaignRecord,
    CompileResult,
    CompileStatus,
    Definition,
    EvaluationStatus,
    JudgeCorrectness,
    JudgeResult,
    KernelResources,
    LLMUsage,
    Performance,
    PtxasResources,
    SassReport,
    Solution,
    StaticTarget,
    TargetInstruction,
    TargetInstructionEvidence,
    Trace,
    TrajectoryRecord,
    TurnRecord,
)

# Written from FlashInfer-Trace's documented field lists (definition / workload / solution / trace).
FIB_DEFINITION = {
    "name": "rmsnorm_h4096",
    "op_type": "rmsnorm",
    "axes": {
        "batch_size": {"type": "var", "description": "tokens"},
        "hidden_size": {"type": "const", "value": 4096, "description": None},
    },
    "inputs": {
        "hidden_states": {"shape": ["batch_size", "hidden_size"], "dtype": "bfloat16", "description": None},
        "weight": {"shape": ["hidden_size"], "dtype": "bfloat16", "description": None},
        "eps": {"shape": None, "dtype": "float32", "description": "epsilon"},
    },
    "outputs": {"output": {"shape": ["batch_size", "hidden_size"], "dtype": "bfloat16", "description": None}},
    "reference": "import torch\n\ndef run(hidden_states, weight, eps):\n    return hidden_states\n",
    "tags": ["status:verified"],
    "description": "Root mean square normalization.",
    "constraints": [],
}
FIB_WORKLOAD_TRACE = {
    "definition": "rmsnorm_h4096",
    "workload": {
        "uuid": "0b5f1f5e-2a51-4c0b-9d3e-7a0e8d6f3c11",
        "axes": {"batch_size": 7},
        "inputs": {
            "hidden_states": {"type": "random"},
            "weight": {"type": "safetensors", "path": "./blob/w.safetensors", "tensor_key": "weight"},
            "eps": {"type": "scalar", "value": 1e-6},
        },
        "outputs": None,
    },
    "solution": None,
    "evaluation": None,
}
FIB_SOLUTION = {
    "name": "rmsnorm_cuda_v1",
    "definition": "rmsnorm_h4096",
    "author": "someone",
    "spec": {
        "language": "cuda",
        "target_hardware": ["H100"],
        "entry_point": "kernel.cu::run",
        "dependencies": [],
        "destination_passing_style": True,
        "binding": "tvm-ffi",
    },
    "sources": [{"path": "kernel.cu", "content": "// kernel\n"}],
    "description": None,
}
FIB_TRACE = {
    **FIB_WORKLOAD_TRACE,
    "solution": "rmsnorm_cuda_v1",
    "evaluation": {
        "status": "PASSED",
        "environment": {"hardware": "NVIDIA H100", "libs": {"torch": "2.8.0"}},
        "timestamp": "2026-11-29T12:00:00Z",
        "log": "",
        "correctness": {"max_relative_error": 1e-3, "max_absolute_error": 2e-3, "extra": None},
        "performance": {"latency_ms": 0.5, "reference_latency_ms": 0.6, "speedup_factor": 1.2},
    },
}


@pytest.mark.parametrize(
    ("model", "doc"),
    [(Definition, FIB_DEFINITION), (Trace, FIB_WORKLOAD_TRACE), (Solution, FIB_SOLUTION), (Trace, FIB_TRACE)],
)
def test_flashinfer_trace_documents_round_trip(model, doc):
    parsed = model.model_validate(doc)
    again = json.loads(parsed.model_dump_json())
    assert again == doc
    assert model.model_validate_json(parsed.model_dump_json()) == parsed


def test_models_are_frozen_and_strict():
    d = Definition.model_validate(FIB_DEFINITION)
    with pytest.raises(ValidationError):
        d.name = "other"  # type: ignore[misc]
    with pytest.raises(ValidationError):
        Definition.model_validate({**FIB_DEFINITION, "unexpected": 1})


def test_definition_resolves_shapes_and_prompt_json_drops_tags():
    d = Definition.model_validate(FIB_DEFINITION)
    assert d.resolve_shape(d.inputs["hidden_states"], {"batch_size": 7}) == (7, 4096)
    assert d.resolve_shape(d.inputs["eps"], {}) is None
    assert "tags" not in d.prompt_json()
    with pytest.raises(ValueError, match="batch_size"):
        d.resolve_shape(d.inputs["hidden_states"], {})


def test_solution_hash_is_content_identity():
    a = Solution.model_validate(FIB_SOLUTION)
    b = Solution.model_validate({**FIB_SOLUTION, "name": "renamed"})
    c = Solution.model_validate({**FIB_SOLUTION, "sources": [{"path": "kernel.cu", "content": "// other\n"}]})
    assert a.content_sha256() == b.content_sha256() != c.content_sha256()


def _turn() -> TurnRecord:
    compile_result = CompileResult(
        status=CompileStatus.COMPILED, source_sha256="ab" * 32, arch="hopper", flags=["-O3"],
        resources=PtxasResources(kernels=[KernelResources(function="k", arch="sm_90a", registers=90)]),
    )
    evidence = TargetInstructionEvidence(
        status=TargetInstruction.EXECUTED, static=StaticTarget.PRESENT,
        family_thread_inst_executed={"gmma": 4096}, raw_rows=[{"opcode": "HGMMA.64x8x16.F32.BF16", "n": 4096}],
    )
    judge = JudgeResult(
        status=EvaluationStatus.PASSED, definition="gemm_n7168_k5120", arch="hopper",
        correctness=JudgeCorrectness(max_absolute_error=0.01), performance=Performance(
            latency_ms=1.0, reference_latency_ms=0.8, speedup_factor=0.8),
        target_instruction=evidence, compile=compile_result,
        sass=SassReport(arch="hopper", target_static=StaticTarget.PRESENT, counts={"HGMMA": 2}),
    )
    return TurnRecord(
        campaign_id="c1", trajectory_id="t1", turn=0, model="replay/demo", arch="hopper", gpu="NVIDIA H200",
        prompt_variant="hopper-full", problem="gemm_n7168_k5120", kernel_sha256="cd" * 32,
        response_text="```cpp\n...\n```", usage=LLMUsage(prompt_tokens=10, completion_tokens=20),
        status=EvaluationStatus.PASSED, target_instruction=TargetInstruction.EXECUTED, speedup=0.8,
        compile=compile_result, judge=judge,
    )


@pytest.mark.parametrize(
    "record",
    [
        _turn(),
        CampaignRecord(campaign_id="c1", name="demo", config_yaml="a: 1\n"),
        TrajectoryRecord(campaign_id="c1", trajectory_id="t1", model="m", arch="hopper", prompt_variant="v",
                         problem="p"),
    ],
    ids=["turn", "campaign", "trajectory"],
)
def test_our_records_round_trip_with_schema_version(record):
    raw = record.model_dump_json()
    assert json.loads(raw)["schema_version"] == SCHEMA_VERSION
    assert type(record).model_validate_json(raw) == record


def test_turn_key_and_status_semantics():
    t = _turn()
    assert t.key == ("c1", "t1", 0)
    assert EvaluationStatus.PASSED.is_correct
    assert not EvaluationStatus.INFRA_ERROR.counts_against_model
    assert EvaluationStatus.EXTRACTION_ERROR.counts_against_model
    with pytest.raises(ValidationError):
        TurnRecord.model_validate({**t.model_dump(), "turn": -1})
