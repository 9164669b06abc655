"""Task bodies: each is one ptxcore call returning a schema object."""

from __future__ import annotations

from ptxcore.agent import CallContext
from ptxcore.schema import CompileStatus, EvaluationStatus, TurnRecord
from tasks.compile import compile_kernel
from tasks.generate import generate
from tasks.record import record_turn
from tasks.states import value


def test_compile_task_returns_the_compile_stage_verdict(monkeypatch, compile_cache_dir):
    monkeypatch.setenv("PTXBENCH_CACHE_DIR", str(compile_cache_dir))
    state = compile_kernel.fn("#include <cublas_v2.h>\nvoid run() {}\n", "hopper", label="x")
    rejected = value(state)
    assert rejected.result.status is CompileStatus.REJECTED and rejected.artifact is None
    assert state.is_completed() and state.name == "REJECTED"
    state = compile_kernel.fn("__global__ void k( {}\n", "h100", label="x")
    broken = value(state)
    assert broken.result.status is CompileStatus.COMPILE_ERROR and "error" in broken.result.log
    assert state.name == "COMPILE_ERROR" and state.message


def test_generate_task_calls_the_client():
    class Client:
        def complete(self, messages, context):
            from ptxcore.agent import LLMReply

            return LLMReply(text=f"{context.turn}:{messages[-1]['content']}")

    ctx = CallContext(problem="p", arch="hopper", prompt_variant="v", turn=3)
    assert generate.fn(Client(), [{"role": "user", "content": "hi"}], ctx, label="x").text == "3:hi"


def test_record_task_hands_the_record_to_the_sink_and_returns_its_key():
    got = []

    class Sink:
        def record_turn(self, record):
            got.append(record)

    rec = TurnRecord(campaign_id="c", trajectory_id="t", turn=2, model="m", arch="hopper", gpu="",
                     prompt_variant="v", problem="p", status=EvaluationStatus.NOT_EVALUATED)
    state = record_turn.fn(Sink(), rec, label="x")
    assert value(state) == ("c", "t", 2) and got == [rec]
    assert state.name == "NOT_EVALUATED" and state.message.startswith("turn 2: NOT_EVALUATED")
