"""The campaign's single writer: one thread owns the DuckDB warehouse and the MLflow client.

DuckDB allows one writing process and MLflow's sqlite store dislikes concurrent writers, so every
write (and every read of the warehouse) of a running campaign is a job on this thread's queue.
`record_turn` returns only after the turn is committed to the warehouse (the source of truth), so a
turn a trajectory has moved past is durable; MLflow is written right after and reconciled from the
warehouse at start and end, so a crash between the two never loses or duplicates a step.
"""

from __future__ import annotations

import contextvars
import logging
import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future
from pathlib import Path
from typing import Any, TypeVar

from ptxcore.agent import TrajectoryPlan
from ptxcore.schema import TrajectoryRecord, TurnRecord
from ptxcore.warehouse import Warehouse

from .tracking import MlflowTracker

log = logging.getLogger(__name__)
T = TypeVar("T")
Job = Callable[[Warehouse, MlflowTracker], Any]
TurnListener = Callable[[TurnRecord], None]


class RecordWriter:
    """Serialises warehouse and MLflow work of one campaign on a dedicated thread."""

    def __init__(self, warehouse_path: Path, tracker_factory: Callable[[], MlflowTracker],
                 plans: dict[str, TrajectoryPlan]) -> None:
        self.warehouse_path = warehouse_path
        self._tracker_factory = tracker_factory
        self.plans = plans
        self._jobs: queue.Queue[tuple[Job, Future] | None] = queue.Queue()
        self._thread = threading.Thread(target=lambda: self._context.run(self._serve), name="ptxbench-writer",
                                        daemon=True)
        self._context = contextvars.copy_context()
        self._ready: Future = Future()
        self.listeners: list[TurnListener] = []
        self.mlflow_failures = 0

    # -- lifecycle -------------------------------------------------------------------------------
    def start(self) -> RecordWriter:
        """Start the writer thread in a copy of the caller's context: inside a flow run, its log lines belong
        to that run (flows/logs.py)."""
        self._context = contextvars.copy_context()
        self._thread.start()
        self._ready.result()  # re-raises a failure to open the warehouse or MLflow
        return self

    def close(self) -> None:
        if self._thread.is_alive():
            self._jobs.put(None)
            self._thread.join()

    def __enter__(self) -> RecordWriter:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _serve(self) -> None:
        try:
            warehouse = Warehouse(self.warehouse_path)
            tracker = self._tracker_factory()
        except BaseException as exc:  # noqa: BLE001 - handed to start()
            self._ready.set_exception(exc)
            return
        self._ready.set_result(True)
        try:
            while (item := self._jobs.get()) is not None:
                job, future = item
                try:
                    future.set_result(job(warehouse, tracker))
                except BaseException as exc:  # noqa: BLE001 - handed to the caller
                    future.set_exception(exc)
        finally:
            warehouse.close()

    def call(self, job: Callable[[Warehouse, MlflowTracker], T]) -> T:
        """Run `job(warehouse, tracker)` on the writer thread and wait for its result."""
        if not self._thread.is_alive():
            raise RuntimeError("the campaign writer is not running")
        future: Future = Future()
        self._jobs.put((job, future))
        return future.result()

    # -- records ---------------------------------------------------------------------------------
    def mlflow_safely(self, fn: Callable[[], Any]) -> None:
        try:
            fn()
        except Exception as exc:  # noqa: BLE001 - MLflow is a view: reconciled from the warehouse later
            self.mlflow_failures += 1
            log.warning("MLflow write failed (will be reconciled from the warehouse): %s", exc)

    def record_turn(self, record: TurnRecord) -> None:
        def job(wh: Warehouse, tracker: MlflowTracker) -> None:
            wh.upsert_turns([record])
            self.mlflow_safely(lambda: tracker.log_turn(self.plans[record.trajectory_id], record))

        self.call(job)
        log.info("recorded turn %s #%d: %s", record.trajectory_id, record.turn, record.status.value)
        for listener in list(self.listeners):
            listener(record)

    def record_trajectory(self, record: TrajectoryRecord) -> None:
        def job(wh: Warehouse, tracker: MlflowTracker) -> None:
            wh.upsert_trajectory(record)
            self.mlflow_safely(lambda: tracker.finish_trajectory(self.plans[record.trajectory_id], record))

        self.call(job)

    def reconcile_mlflow(self) -> int:
        """Log every valid warehouse turn that MLflow lacks, and tag runs with their invalidated turns (never
        logged from here on; `ptxbench warehouse invalidate`); returns how many turns were added."""
        def job(wh: Warehouse, tracker: MlflowTracker) -> int:
            added = 0
            invalid = wh.invalid_turns(tracker.campaign_id)
            for record in wh.turns(tracker.campaign_id):
                plan = self.plans.get(record.trajectory_id)
                if plan is not None and record.key not in invalid and tracker.log_turn(plan, record):
                    added += 1
            by_trajectory: dict[str, dict[int, str]] = {}
            for (_, trajectory_id, turn), reason in invalid.items():
                by_trajectory.setdefault(trajectory_id, {})[turn] = reason
            self.mlflow_safely(lambda: tracker.mark_invalid_turns(by_trajectory))
            return added

        return self.call(job)
