"""One GPU's lane: a thread that owns the GPU's persistent worker, takes tasks from the dispatcher,
checks health between tasks, replaces a hung or dead worker, and drains the GPU when it is unhealthy."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Protocol

from ptxcore.gpu.service.config import HealthThresholds
from ptxcore.gpu.service.dispatch import Dispatcher, LaneSnapshot, QueuedTask
from ptxcore.gpu.service.health import HealthVerdict, assess
from ptxcore.gpu.service.models import (
    AttemptDisposition,
    AttemptRecord,
    GpuCondition,
    GpuHealth,
    LaneState,
    LaneView,
    WorkItem,
)
from ptxcore.gpu.service.outcome import Action, Decision, classify
from ptxcore.gpu.service.worker import GpuWorker, OutcomeKind, WorkerError

log = logging.getLogger(__name__)


class LaneHost(Protocol):
    """What a lane needs from the service."""

    def begin(self, task: QueuedTask, gpu: int) -> WorkItem | None:
        """Mark the task running on `gpu`; None when it is no longer pending."""

    def finish(self, task: QueuedTask, decision: Decision, attempt: AttemptRecord) -> None:
        """Score the verdict, or exclude the attempt and retry / fail the task."""


class Lane(threading.Thread):
    def __init__(self, gpu: int, make_worker: Callable[[int], GpuWorker], dispatcher: Dispatcher,
                 host: LaneHost, thresholds: HealthThresholds, idle_check_s: float = 30.0) -> None:
        super().__init__(name=f"gpu-lane-{gpu}", daemon=True)
        self.gpu = gpu
        self._make_worker, self._dispatcher, self._host, self._t = make_worker, dispatcher, host, thresholds
        self._idle_check_s = idle_check_s
        self._worker: GpuWorker | None = None
        self._lock = threading.Lock()
        self._halt = threading.Event()
        self._wake = threading.Event()
        self._state = LaneState.STARTING
        self._condition, self._reasons = GpuCondition.UNKNOWN, []
        self._health: GpuHealth | None = None
        self._current: str | None = None
        self._operator_hold = False
        self._exclude_current = ""
        self._healthy_streak = 0
        self.scored = self.excluded = self.restarts = 0

    # -- operator interface ----------------------------------------------------------------------------

    def view(self) -> LaneView:
        with self._lock:
            return LaneView(gpu=self.gpu, state=self._state, condition=self._condition,
                            reasons=[r for r in self._reasons if r], current_task=self._current,
                            worker_pid=self._worker.pid if self._worker else None, tasks_scored=self.scored,
                            tasks_excluded=self.excluded, restarts=self.restarts, health=self._health)

    def drain(self, reason: str, exclude_running: bool = True) -> None:
        """Operator: take no tasks; with exclude_running, the running attempt's verdict is discarded."""
        with self._lock:
            self._operator_hold = True
            self._reasons = [f"drained by operator: {reason}"]
            if self._current and exclude_running:
                self._exclude_current = f"GPU {self.gpu} drained by operator: {reason}"
            if self._state is not LaneState.BUSY:
                self._state = LaneState.DRAINED
        self._publish()
        self._dispatcher.reclaim(self.gpu)

    def resume(self) -> None:
        """Operator: lift a drain; the GPU still has to pass its health checks."""
        with self._lock:
            self._operator_hold = False
            self._healthy_streak = self._t.healthy_checks_to_resume - 1
        self._wake.set()

    def stop(self) -> None:
        self._halt.set()
        self._wake.set()

    def abort(self) -> None:
        """Kill the worker now (shutdown past its grace period); the running attempt ends as DIED."""
        worker = self._worker
        if worker is not None:
            worker.abort()

    # -- thread ----------------------------------------------------------------------------------------

    def run(self) -> None:
        try:
            while not self._halt.is_set():
                try:
                    self._serve()
                except Exception:  # a bug in the lane must not silently retire the GPU
                    log.exception("GPU %d: lane failed; restarting it", self.gpu)
                    with self._lock:
                        self._state, self._current = LaneState.FAILED, None
                    if self._worker is not None:
                        self._worker.stop()
                        self._worker = None
                    self._halt.wait(self._t.recheck_s)
        finally:
            self._set_state(LaneState.STOPPED)
            self._publish()
            if self._worker is not None:
                self._worker.stop()

    def _serve(self) -> None:
        if self._worker is None:
            self._start_worker()
        if self._worker is not None:
            self._apply(self._probe())
        while not self._halt.is_set():
            if self._state in (LaneState.DRAINED, LaneState.FAILED):
                self._recover_step()
                continue
            self._publish()
            task = self._dispatcher.next_task(self.gpu, timeout_s=self._idle_check_s)
            if self._halt.is_set():
                if task is not None:
                    self._dispatcher.submit(task, front=True)
                return
            if task is None:
                self._apply(self._probe())
            else:
                self._attempt(task)

    def _attempt(self, task: QueuedTask) -> None:
        item = self._host.begin(task, self.gpu)
        if item is None:
            return
        with self._lock:
            self._state, self._current, self._exclude_current = LaneState.BUSY, task.task_id, ""
        started = time.time()
        outcome = self._worker.run(item, deadline_s=item.timeout_s)
        if outcome.kind is not OutcomeKind.RESULT:
            self._replace_worker(f"{outcome.kind.value}: {outcome.detail}"[:300])
        verdict = self._probe()
        decision = classify(outcome, item, verdict, self._t.draining_throttle_reasons)
        with self._lock:
            operator_reason = self._exclude_current
        if operator_reason and decision.action is Action.SCORE:
            decision = Decision(Action.RETRY, operator_reason, None)
        scored = decision.action is Action.SCORE
        record = AttemptRecord(gpu=self.gpu, started_at=started, finished_at=time.time(), reason=decision.reason,
                               disposition=AttemptDisposition.SCORED if scored else AttemptDisposition.EXCLUDED)
        if not scored:
            log.warning("GPU %d: attempt at %s excluded: %s", self.gpu, task.task_id, decision.reason)
        self._host.finish(task, decision, record)
        with self._lock:
            self.scored, self.excluded = self.scored + scored, self.excluded + (not scored)
            self._current, self._state = None, LaneState.IDLE
        if decision.replace_worker and outcome.kind is OutcomeKind.RESULT:
            self._replace_worker("suspect after the attempt")
        if verdict is not None:
            self._apply(verdict)
        if self._operator_hold:
            self._set_state(LaneState.DRAINED)

    # -- health ----------------------------------------------------------------------------------------

    def _probe(self) -> HealthVerdict:
        for _ in range(2):
            if self._worker is None:
                break
            try:
                health = self._worker.health(self._t.check_timeout_s)
            except WorkerError as exc:
                self._replace_worker(str(exc))
                continue
            verdict = assess(health, self._t)
            with self._lock:
                self._health, self._condition = health, verdict.condition
                if not self._operator_hold:
                    self._reasons = list(verdict.reasons)
            return verdict
        verdict = HealthVerdict(GpuCondition.UNRESPONSIVE, ("worker does not answer health checks",))
        with self._lock:
            self._condition, self._reasons = verdict.condition, list(verdict.reasons)
        return verdict

    def _apply(self, verdict: HealthVerdict) -> None:
        if verdict.restarts_worker and verdict.condition is GpuCondition.LEAKING:
            self._replace_worker("; ".join(verdict.reasons))
            verdict = self._probe()  # the fresh worker's reading
        if verdict.drains:
            log.warning("GPU %d drained: %s", self.gpu, "; ".join(verdict.reasons))
            self._healthy_streak = 0
            self._set_state(LaneState.DRAINED)
            self._publish()
            self._dispatcher.reclaim(self.gpu)

    def _recover_step(self) -> None:
        self._publish()
        self._wake.wait(self._t.recheck_s)
        self._wake.clear()
        if self._halt.is_set():
            return
        if self._worker is None:
            self._start_worker()
            return
        verdict = self._probe()
        self._healthy_streak = self._healthy_streak + 1 if not verdict.drains else 0
        if self._healthy_streak >= self._t.healthy_checks_to_resume and not self._operator_hold:
            log.info("GPU %d healthy again; taking tasks", self.gpu)
            self._set_state(LaneState.IDLE)

    # -- worker ----------------------------------------------------------------------------------------

    def _start_worker(self) -> None:
        worker = self._make_worker(self.gpu)
        try:
            worker.start()
        except WorkerError as exc:
            log.error("GPU %d: %s", self.gpu, exc)
            with self._lock:
                self._worker, self._state = None, LaneState.FAILED
                self._condition, self._reasons = GpuCondition.UNRESPONSIVE, [str(exc)[:300]]
            return
        with self._lock:
            self._worker = worker
            if self._state in (LaneState.STARTING, LaneState.RESTARTING, LaneState.FAILED):
                self._state = LaneState.IDLE

    def _replace_worker(self, why: str) -> None:
        log.warning("GPU %d: replacing worker: %s", self.gpu, why)
        old, busy = self._worker, self._state is LaneState.BUSY
        if old is not None:
            old.stop()
        with self._lock:
            self.restarts += 1
            self._worker, self._state = None, LaneState.RESTARTING
        self._start_worker()
        if busy and self._state is LaneState.IDLE:
            self._set_state(LaneState.BUSY)

    def _set_state(self, state: LaneState) -> None:
        with self._lock:
            self._state = state

    def _publish(self) -> None:
        with self._lock:
            h, state = self._health, self._state
        total = (h.memory_total_bytes or 0) if h else 0
        free = (h.memory_free_bytes or 0) if h else 0
        external = max(0, total - free - h.worker_allocated_bytes) if h and total else 0
        self._dispatcher.update_lane(LaneSnapshot(
            gpu=self.gpu, accepting=state is LaneState.IDLE, busy=state is LaneState.BUSY, free_bytes=free,
            total_bytes=total, resident=dict(h.resident) if h else {},
            utilization_pct=(h.utilization_pct or 0) if h else 0, external_bytes=external))
