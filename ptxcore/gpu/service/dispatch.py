"""Dispatch: which idle GPU runs which pending task.

Late binding: a task is bound to a GPU only when that GPU's worker is idle, so a long task never
strands others in a per-GPU queue. Among idle, healthy GPUs a task goes to the one where its memory
need fits (counting evictable cached state), preferring the GPU that already holds its workload state,
then the one that needs no eviction, then the least loaded by others (utilisation, memory they hold),
then the most free memory. A retried task avoids the GPUs where it failed while any other can serve.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from dataclasses import dataclass, field


@dataclass(frozen=True)
class QueuedTask:
    """What the dispatcher needs to know about a pending task."""

    task_id: str
    state_key: str
    state_bytes: int
    transient_bytes: int
    attempt: int = 1
    excluded_gpus: frozenset[int] = frozenset()
    enqueued_at: float = field(default_factory=time.monotonic)


@dataclass(frozen=True)
class LaneSnapshot:
    """One GPU as the planner sees it."""

    gpu: int
    accepting: bool
    """Healthy, worker ready, not drained."""
    busy: bool
    free_bytes: int
    """Free device memory (0 with total 0: unknown)."""
    total_bytes: int
    """Device memory; 0 when not read yet."""
    resident: dict[str, int] = field(default_factory=dict)
    """Cached workload states: key -> bytes."""
    utilization_pct: int = 0
    """Load by others while our worker is idle."""
    external_bytes: int = 0
    """Device memory held by processes other than our worker."""


@dataclass(frozen=True)
class Plan:
    """Assignments and tasks that no GPU here could ever hold."""

    assignments: tuple[tuple[str, int], ...]
    impossible: tuple[str, ...]


def _fit(task: QueuedTask, lane: LaneSnapshot, reserve: int) -> tuple[bool, bool]:
    """(fits at all, fits without evicting cached state). Unknown memory (total 0) fits."""
    if lane.total_bytes <= 0:
        return True, True
    resident = task.state_key in lane.resident
    need = task.transient_bytes + (0 if resident else task.state_bytes) + reserve
    evictable = sum(b for k, b in lane.resident.items() if k != task.state_key)
    return lane.free_bytes + evictable >= need, lane.free_bytes >= need


def _score(task: QueuedTask, lane: LaneSnapshot, no_evict: bool) -> tuple:
    load_bucket = lane.utilization_pct // 10
    return (task.state_key not in lane.resident, not no_evict, load_bucket, lane.external_bytes >> 30,
            -lane.free_bytes, lane.gpu)


def _could_ever_fit(task: QueuedTask, lanes: list[LaneSnapshot], reserve: int) -> bool:
    known = [lane for lane in lanes if lane.total_bytes > 0]
    if len(known) < len(lanes) or not known:
        return True  # judge impossibility only once every GPU has reported its memory
    need = task.transient_bytes + task.state_bytes + reserve
    return any(lane.total_bytes - lane.external_bytes >= need for lane in known)


def plan(pending: list[QueuedTask], lanes: list[LaneSnapshot], *, reserve_bytes: int = 0,
         window: int = 64) -> Plan:
    """Pure planner. Looks at up to `window` pending tasks in FIFO order."""
    idle = [lane for lane in lanes if lane.accepting and not lane.busy]
    accepting_gpus = {lane.gpu for lane in lanes if lane.accepting}
    out: list[tuple[str, int]] = []
    impossible: list[str] = []
    for task in pending[:window]:
        if not _could_ever_fit(task, lanes, reserve_bytes):
            impossible.append(task.task_id)
            continue
        if not idle:
            continue
        # Avoid GPUs where this task already failed, unless no other accepting GPU exists.
        allowed = [lane for lane in idle if lane.gpu not in task.excluded_gpus]
        if not allowed and accepting_gpus <= task.excluded_gpus:
            allowed = idle
        best = None
        for lane in allowed:
            fits, no_evict = _fit(task, lane, reserve_bytes)
            if fits and (best is None or _score(task, lane, no_evict) < best[0]):
                best = (_score(task, lane, no_evict), lane)
        if best is not None:
            out.append((task.task_id, best[1].gpu))
            idle.remove(best[1])
    return Plan(tuple(out), tuple(impossible))


class Dispatcher:
    """Pending queue plus one mailbox per GPU. Lanes block in `next_task`; every event re-plans."""

    def __init__(self, gpus: list[int], reserve_bytes: int = 0) -> None:
        self._cond = threading.Condition()
        self._pending: deque[QueuedTask] = deque()
        self._lanes: dict[int, LaneSnapshot] = {g: LaneSnapshot(g, False, False, 0, 0) for g in gpus}
        self._mailbox: dict[int, QueuedTask | None] = {g: None for g in gpus}
        self._reserve = reserve_bytes
        self._closed = False
        self.on_impossible = lambda task: None
        """Called (outside the lock) with each task that no GPU here can hold."""

    def submit(self, task: QueuedTask, front: bool = False) -> None:
        with self._cond:
            (self._pending.appendleft if front else self._pending.append)(task)
        self._replan()

    def update_lane(self, snapshot: LaneSnapshot) -> None:
        with self._cond:
            self._lanes[snapshot.gpu] = snapshot
        self._replan()

    def pending_count(self) -> int:
        with self._cond:
            return len(self._pending) + sum(1 for t in self._mailbox.values() if t is not None)

    def next_task(self, gpu: int, timeout_s: float) -> QueuedTask | None:
        """Block until a task is assigned to `gpu` (or timeout / close)."""
        deadline = time.monotonic() + timeout_s
        with self._cond:
            while self._mailbox[gpu] is None and not self._closed:
                left = deadline - time.monotonic()
                if left <= 0:
                    return None
                self._cond.wait(left)
            task, self._mailbox[gpu] = self._mailbox[gpu], None
            if task is not None:  # busy from now until the lane publishes again
                self._lanes[gpu] = _as_busy(self._lanes[gpu])
            return task

    def reclaim(self, gpu: int) -> None:
        """A lane stops accepting: put its undelivered assignment back at the front."""
        with self._cond:
            task, self._mailbox[gpu] = self._mailbox[gpu], None
            if task is not None:
                self._pending.appendleft(task)
        self._replan()

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    def _replan(self) -> None:
        dropped: list[QueuedTask] = []
        with self._cond:
            lanes = [lane if self._mailbox[g] is None else _as_busy(lane) for g, lane in self._lanes.items()]
            result = plan(list(self._pending), lanes, reserve_bytes=self._reserve)
            by_id = {t.task_id: t for t in self._pending}
            for task_id, gpu in result.assignments:
                self._mailbox[gpu] = by_id[task_id]
                self._pending.remove(by_id[task_id])
            for task_id in result.impossible:
                dropped.append(by_id[task_id])
                self._pending.remove(by_id[task_id])
            if result.assignments:
                self._cond.notify_all()
        for task in dropped:
            self.on_impossible(task)


def _as_busy(lane: LaneSnapshot) -> LaneSnapshot:
    return LaneSnapshot(lane.gpu, lane.accepting, True, lane.free_bytes, lane.total_bytes, lane.resident,
                        lane.utilization_pct, lane.external_bytes)
