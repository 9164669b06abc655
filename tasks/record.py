"""The record task: hand a finished turn to the campaign's single writer and wait until it is durable."""

from __future__ import annotations

from typing import Protocol

from prefect import task
from prefect.cache_policies import NO_CACHE

from ptxcore.schema import TurnRecord

from .states import verdict_outcome


class TurnSink(Protocol):
    """The one writer of a campaign (DuckDB allows one writing process; MLflow is written beside it)."""

    def record_turn(self, record: TurnRecord) -> None: ...


@task(name="record", task_run_name="record {label}", cache_policy=NO_CACHE)
def record_turn(sink: TurnSink, record: TurnRecord, label: str) -> tuple[str, str, int]:
    """Returns the turn's key once the writer has committed it; the state is named by the turn's verdict."""
    sink.record_turn(record)
    speed = f", speedup {record.speedup:.2f}x" if record.speedup is not None else ""
    recorded = record.judge.recorded if record.judge is not None else None
    return verdict_outcome(record.status.value, recorded, f"turn {record.turn}: {record.status.value}{speed}; "  # type: ignore[return-value]
                           f"target instructions {record.target_instruction.value}", record.key)
