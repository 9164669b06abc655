"""ProfilerService: the task store, the dispatcher and one lane per GPU, behind a small method API that
the HTTP app (app.py) exposes. No FastAPI here; the app is a thin translation layer."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import threading
import time
from collections.abc import Callable

from ptxcore.arch import UnknownArchitectureError, get_architecture
from ptxcore.gpu.service.config import ServiceConfig
from ptxcore.gpu.service.dispatch import Dispatcher, QueuedTask
from ptxcore.gpu.service.lane import Lane
from ptxcore.gpu.service.memory import memory_need
from ptxcore.gpu.service.models import (
    AttemptRecord,
    HealthView,
    LaneState,
    ServiceStatus,
    SubmitRequest,
    SubmitResponse,
    TaskKind,
    TaskState,
    TaskView,
    WorkItem,
)
from ptxcore.gpu.service.outcome import Action, Decision, verdict_result
from ptxcore.gpu.service.prebuild import JUDGE_RUNNER, prebuilder_for
from ptxcore.gpu.service.store import TaskStore
from ptxcore.gpu.service.workdir import WorkDir
from ptxcore.gpu.service.worker import GpuWorker, ProcessGpuWorker
from ptxcore.problems import Problem, ProblemNotFoundError, load_catalog
from ptxcore.schema import EvaluationStatus, Language

log = logging.getLogger(__name__)
VERSION = "0.1.0"


class ServiceError(Exception):
    """A request the service refuses; `status_code` is the HTTP status."""

    status_code = 400


class NotFound(ServiceError):
    status_code = 404


class TooLarge(ServiceError):
    status_code = 413


class Busy(ServiceError):
    status_code = 503


class Waiters:
    """Long-poll support: asyncio events per task id, set from lane threads."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._events: dict[str, set[asyncio.Event]] = {}

    def bind(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop

    def notify(self, task_id: str) -> None:
        with self._lock:
            events, loop = list(self._events.get(task_id, ())), self._loop
        for event in events:
            loop.call_soon_threadsafe(event.set)

    def register(self, task_ids: list[str], event: asyncio.Event) -> None:
        with self._lock:
            for t in task_ids:
                self._events.setdefault(t, set()).add(event)

    def unregister(self, task_ids: list[str], event: asyncio.Event) -> None:
        with self._lock:
            for t in task_ids:
                self._events.get(t, set()).discard(event)
                if not self._events.get(t):
                    self._events.pop(t, None)


class ProfilerService:
    def __init__(self, config: ServiceConfig, make_worker: Callable[[int], GpuWorker] | None = None,
                 catalog: dict[str, Problem] | None = None) -> None:
        self.config = config
        self.workdir = WorkDir(config.work_dir)
        self.store = TaskStore(self.workdir.store_path)
        self.catalog = catalog if catalog is not None else load_catalog()
        self.dispatcher = Dispatcher(config.gpus)
        self.dispatcher.on_impossible = self._impossible
        self.waiters = Waiters()
        self._make_worker = make_worker or self._process_worker
        self._stopping = False
        self.lanes = {g: Lane(g, self._make_worker, self.dispatcher, self, config.health, config.idle_check_s)
                      for g in config.gpus}
        self.prebuilder = prebuilder_for(config.runner, dict(config.runner_args), config.prebuild_workers)

    def _process_worker(self, gpu: int) -> GpuWorker:
        start_s = self.config.worker_start_timeout_s + (self.config.warm_timeout_s if self.runs_the_judge else 0.0)
        return ProcessGpuWorker(gpu, self.config.runner, dict(self.config.runner_args),
                                self.workdir.worker_dir(gpu), start_s)

    @property
    def runs_the_judge(self) -> bool:
        """Whether the workers run the judge (they then warm baselines and read the prebuilt compile cache)."""
        return self.config.runner == JUDGE_RUNNER

    # -- lifecycle -------------------------------------------------------------------------------------

    def start(self) -> None:
        lost, pending = self.store.recover()
        if lost:
            log.warning("%d task(s) were running when the service last stopped: marked lost", len(lost))
        for view in pending:
            self._enqueue(view, attempt=len(view.attempts) + 1, excluded=frozenset(a.gpu for a in view.attempts))
        for lane in self.lanes.values():
            lane.start()

    def stop(self) -> None:
        self._stopping = True
        self.dispatcher.close()
        if self.prebuilder is not None:
            self.prebuilder.stop()
        for lane in self.lanes.values():
            lane.stop()
        deadline = time.monotonic() + self.config.shutdown_grace_s
        for lane in self.lanes.values():
            lane.join(max(0.0, deadline - time.monotonic()))
        for lane in self.lanes.values():
            if lane.is_alive():
                lane.abort()
                lane.join(30)
        self.store.close()

    # -- requests --------------------------------------------------------------------------------------

    def submit(self, kind: TaskKind, req: SubmitRequest) -> SubmitResponse:
        if self._stopping:
            raise Busy("the service is shutting down")
        problem, workload_uuid, arch = self._validate(req)
        source = req.source_text()
        if len(source.encode()) > self.config.max_source_bytes:
            raise TooLarge(f"source is {len(source.encode())} bytes; limit {self.config.max_source_bytes}")
        timeout_s = req.timeout_s or self.config.default_timeout_s
        if timeout_s > self.config.max_timeout_s:
            raise ServiceError(f"timeout_s {timeout_s:g} exceeds the limit {self.config.max_timeout_s:g}")
        if self.dispatcher.pending_count() >= self.config.max_pending:
            raise Busy(f"queue full ({self.config.max_pending} pending); retry later")
        sha = self.workdir.write_source(source)
        view = self.store.create(kind=kind, definition=problem.name, workload_uuid=workload_uuid, arch=arch,
                                 source_sha256=sha, client_tag=req.client_tag, timeout_s=timeout_s,
                                 language=req.language)
        if self.prebuilder is not None and req.language is Language.CUDA:
            self.prebuilder.submit(source, arch)
        self._enqueue(view, attempt=1, excluded=frozenset())
        return SubmitResponse(task_id=view.task_id, state=TaskState.PENDING, source_sha256=sha)

    def _validate(self, req: SubmitRequest) -> tuple[Problem, str, str]:
        problem = self.catalog.get(req.definition)
        if problem is None:
            raise NotFound(f"unknown definition {req.definition!r}")
        try:
            workload_uuid = problem.workload(req.workload_uuid).uuid
        except ProblemNotFoundError as exc:
            raise NotFound(str(exc)) from None
        try:
            arch = get_architecture(req.arch).key
        except UnknownArchitectureError as exc:
            raise ServiceError(str(exc)) from None
        if arch not in self.config.archs:
            raise ServiceError(f"this service judges {', '.join(self.config.archs)} only, not {arch}")
        return problem, workload_uuid, arch

    def task(self, task_id: str) -> TaskView:
        view = self.store.get(task_id)
        if view is None:
            raise NotFound(f"unknown task id {task_id}")
        return view

    async def wait(self, task_ids: list[str], wait_s: float) -> list[TaskView]:
        """Views of all tasks once all are terminal or `wait_s` has passed."""
        wait_s = min(wait_s, self.config.max_wait_s)
        deadline = time.monotonic() + wait_s
        event = asyncio.Event()
        self.waiters.register(task_ids, event)
        try:
            while True:
                states = self.store.states(task_ids)
                missing = [t for t in task_ids if t not in states]
                if missing:
                    raise NotFound(f"unknown task id {missing[0]}")
                left = deadline - time.monotonic()
                if left <= 0 or all(s.terminal for s in states.values()):
                    return [self.task(t) for t in task_ids]
                try:
                    await asyncio.wait_for(event.wait(), timeout=left)
                except TimeoutError:
                    pass
                event.clear()
        finally:
            self.waiters.unregister(task_ids, event)

    def health(self) -> HealthView:
        views = [lane.view() for lane in self.lanes.values()]
        serving = [v for v in views if v.state in (LaneState.IDLE, LaneState.BUSY)]
        status = (ServiceStatus.OK if len(serving) == len(views) else
                  ServiceStatus.DEGRADED if serving else ServiceStatus.UNAVAILABLE)
        pending = self.dispatcher.pending_count()
        running = sum(1 for v in views if v.current_task)
        return HealthView(status=status, version=VERSION, gpus=views, pending=pending, running=running,
                          queue_size=pending)

    def drain(self, gpu: int, reason: str) -> None:
        self._lane(gpu).drain(reason)

    def resume(self, gpu: int) -> None:
        self._lane(gpu).resume()

    def _lane(self, gpu: int) -> Lane:
        if gpu not in self.lanes:
            raise NotFound(f"no GPU {gpu} in this service (GPUs: {sorted(self.lanes)})")
        return self.lanes[gpu]

    # -- LaneHost --------------------------------------------------------------------------------------

    def begin(self, task: QueuedTask, gpu: int) -> WorkItem | None:
        if not self.store.mark_running(task.task_id, gpu):
            return None
        view = self.store.get(task.task_id)
        return WorkItem(task_id=view.task_id, kind=view.kind, definition=view.definition,
                        workload_uuid=view.workload_uuid, arch=view.arch,
                        source=self.workdir.read_source(view.source_sha256), source_sha256=view.source_sha256,
                        language=view.language, timeout_s=view.timeout_s, attempt=task.attempt)

    def finish(self, task: QueuedTask, decision: Decision, attempt: AttemptRecord) -> None:
        if decision.action is Action.SCORE:
            self.store.complete(task.task_id, attempt, decision.result)
        elif self._stopping:
            self.store.lose(task.task_id, attempt, "lost: the profiling service shut down during the attempt; resubmit")
        elif task.attempt < self.config.max_attempts:
            self.store.requeue(task.task_id, attempt)
            self.dispatcher.submit(dataclasses.replace(
                task, attempt=task.attempt + 1, excluded_gpus=task.excluded_gpus | {attempt.gpu}), front=True)
        else:
            self.store.fail(task.task_id, attempt, decision.result,
                            f"infrastructure failed on {task.attempt} attempt(s); last: {decision.reason}; "
                            "not charged to the candidate; resubmit later")
        self.waiters.notify(task.task_id)

    # -- internals -------------------------------------------------------------------------------------

    def _enqueue(self, view: TaskView, attempt: int, excluded: frozenset[int]) -> None:
        need = memory_need(self.catalog[view.definition], view.workload_uuid or None)
        self.dispatcher.submit(QueuedTask(task_id=view.task_id, state_key=need.state_key,
                                          state_bytes=need.state_bytes, transient_bytes=need.transient_bytes,
                                          attempt=attempt, excluded_gpus=excluded))

    def _impossible(self, task: QueuedTask) -> None:
        view = self.store.get(task.task_id)
        reason = (f"needs about {(task.state_bytes + task.transient_bytes) >> 20} MiB of device memory; "
                  "no GPU of this service has that much")
        item = WorkItem(task_id=view.task_id, kind=view.kind, definition=view.definition, arch=view.arch,
                        workload_uuid=view.workload_uuid, source="-", source_sha256=view.source_sha256,
                        language=view.language, timeout_s=view.timeout_s)
        self.store.fail(task.task_id, None, verdict_result(item, EvaluationStatus.INFRA_ERROR, reason), reason)
        self.waiters.notify(task.task_id)
