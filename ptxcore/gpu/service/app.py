"""The HTTP face of the profiling service (FastAPI). Endpoint names follow FIBServe where they fit:
POST /evaluate, /sanitize, /profile submit and return a task id; GET /tasks/{id} (long-poll with
`wait_s`, alias `timeout`) and POST /tasks/batch read tasks; GET /health, /definitions. Ours: POST /batch
(submit many), POST /gpus/{gpu}/drain and /resume (operator).

Requests are untrusted: invalid numbers or strings are 422 whose body never echoes the offending value (a
NaN or a lone surrogate in it made FastAPI's own error reply fail with 500); /batch checks every item
(and the queue's room for all of them) before it creates any task; while no GPU is usable every submission
is refused with 503 and Retry-After instead of being queued to wait."""

from __future__ import annotations

import asyncio
import re
import secrets
from contextlib import asynccontextmanager

from fastapi import FastAPI, Path, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from pydantic import Field, TypeAdapter

from ptxcore.gpu.service.models import (
    TASK_ID_PATTERN,
    BatchPollRequest,
    BatchSubmitRequest,
    BatchSubmitResponse,
    HealthView,
    LabelText,
    LaneState,
    SubmitRequest,
    SubmitResponse,
    TaskKind,
    TaskView,
)
from ptxcore.gpu.service.security import GuardMiddleware, machine_names
from ptxcore.gpu.service.service import VERSION, Busy, NotFound, ProfilerService, ServiceError, TooLarge
from ptxcore.schema import FrozenModel

USABLE_LANES = (LaneState.STARTING, LaneState.IDLE, LaneState.BUSY, LaneState.RESTARTING)
"""Lane states that will run a queued task (drained, failed and stopped ones will not, or not soon)."""
RETRY_AFTER_S = 30
"""Retry-After of a 503."""
_NO_WRITES = secrets.token_urlsafe(32)
"""The write token of an app built without one: known to nobody, so nothing but GET/HEAD is served."""


class DrainRequest(FrozenModel):
    """POST /gpus/{gpu}/drain."""

    reason: LabelText = Field(default="operator request")
    """Why (shown in /health; one printable line)."""


def create_app(service: ProfilerService, manage_lifecycle: bool = True, write_token: str | None = None):
    """The ASGI application (FastAPI wrapped in the Host / browser / token / size guard). With manage_lifecycle the
    app starts the service's workers on startup and stops them on shutdown. `write_token`: the per-start token
    every state-changing request must carry when no shared token is configured (ptxcore.gpu.service.server makes
    it); without either, nothing but GET/HEAD is served."""

    @asynccontextmanager
    async def lifespan(_app: FastAPI):
        service.waiters.bind(asyncio.get_running_loop())
        if manage_lifecycle:
            service.start()
        try:
            yield
        finally:
            if manage_lifecycle:
                await asyncio.to_thread(service.stop)

    api = FastAPI(title="PTXBench profiling service", version=VERSION, lifespan=lifespan)

    @api.exception_handler(ServiceError)
    async def _service_error(_request: Request, exc: ServiceError) -> JSONResponse:
        headers = {"Retry-After": str(RETRY_AFTER_S)} if exc.status_code == 503 else None
        return JSONResponse({"detail": _safe(str(exc))}, status_code=exc.status_code, headers=headers)

    @api.exception_handler(RequestValidationError)
    async def _invalid(_request: Request, exc: RequestValidationError) -> JSONResponse:
        detail = [{"loc": [_safe(str(p)) if isinstance(p, str) else p for p in e.get("loc", ())],
                   "msg": _safe(str(e.get("msg", ""))), "type": str(e.get("type", ""))} for e in exc.errors()]
        return JSONResponse({"detail": detail}, status_code=422)

    _info_routes(api, service)
    _task_routes(api, service)
    config = service.config
    names = {*config.allowed_hosts, *machine_names(), config.host}
    return GuardMiddleware(api, token=config.token, max_bytes=config.max_request_bytes,
                           write_token=write_token or config.token or _NO_WRITES, host_names=names)


def _info_routes(api: FastAPI, service: ProfilerService) -> None:
    @api.get("/")
    async def root() -> dict:
        return {"name": "ptxbench-profiler", "version": VERSION, "gpus": service.config.gpus,
                "archs": service.config.archs, "endpoints": sorted(
                    f"{','.join(sorted(r.methods))} {r.path}" for r in api.routes if hasattr(r, "methods"))}

    @api.get("/health", response_model=HealthView)
    async def health() -> HealthView:
        return service.health()

    @api.get("/definitions")
    async def definitions() -> list[dict]:
        return [{"name": p.name, "op_type": p.definition.op_type, "description": p.definition.description,
                 "workloads": len(p.workloads), "baseline": p.extension.baseline.library.value}
                for p in service.catalog.values()]

    @api.get("/definitions/{name}")
    async def definition(name: str) -> dict:
        return _problem(service, name).definition.model_dump(mode="json")

    @api.get("/definitions/{name}/workloads")
    async def workloads(name: str) -> list[dict]:
        return [w.model_dump(mode="json") for w in _problem(service, name).workloads]

    @api.post("/gpus/{gpu}/drain")
    async def drain(gpu: int, req: DrainRequest) -> dict:
        service.drain(gpu, req.reason)
        return {"gpu": gpu, "drained": req.reason}

    @api.post("/gpus/{gpu}/resume")
    async def resume(gpu: int) -> dict:
        service.resume(gpu)
        return {"gpu": gpu, "resumed": True}


def _task_routes(api: FastAPI, service: ProfilerService) -> None:
    for kind in TaskKind:
        api.add_api_route(f"/{kind.value}", _submitter(service, kind), methods=["POST"],
                          response_model=SubmitResponse, status_code=202)

    @api.post("/batch", response_model=BatchSubmitResponse, status_code=202)
    async def batch(req: BatchSubmitRequest) -> BatchSubmitResponse:
        if len(req.items) > service.config.max_batch:
            raise TooLarge(f"{len(req.items)} items; limit {service.config.max_batch}")
        for i, item in enumerate(req.items):  # all or nothing: every check before any task is created
            try:
                _admissible(service, item)
            except ServiceError as exc:
                raise type(exc)(f"item {i}: {exc}") from None
        _require_room(service, len(req.items))
        _require_usable_gpu(service)
        # No await from here on: nothing else runs on this event loop until every item is queued.
        return BatchSubmitResponse(tasks=[service.submit(item.kind, item) for item in req.items])

    # Task views are written with pydantic's own JSON (the schema's "NaN"/"Infinity" strings): FastAPI's
    # encoder would emit float NaN, which JSON rejects (HTTP 500 on a NaN-writing candidate's verdict).
    @api.get("/tasks/{task_id}", response_model=TaskView, response_class=_ModelJSON)
    async def task(task_id: str = Path(pattern=TASK_ID_PATTERN),
                   wait_s: float = Query(default=0.0, ge=0.0, allow_inf_nan=False),
                   timeout: float | None = Query(default=None, ge=0.0, allow_inf_nan=False,
                                                 description="FIBServe alias of wait_s")
                   ) -> Response:
        view = (await service.wait([task_id], timeout if timeout is not None else wait_s))[0]
        return _ModelJSON(_TASK_VIEW.dump_json(view))

    @api.post("/tasks/batch", response_model=list[TaskView], response_class=_ModelJSON)
    async def tasks(req: BatchPollRequest) -> Response:
        if len(req.task_ids) > service.config.max_batch:
            raise TooLarge(f"{len(req.task_ids)} task ids; limit {service.config.max_batch}")
        bad = [t for t in req.task_ids if not re.fullmatch(TASK_ID_PATTERN, t)]
        if bad:
            raise ServiceError(f"malformed task id {bad[0][:80]!r}")
        return _ModelJSON(_TASK_VIEWS.dump_json(await service.wait(req.task_ids, req.wait_s)))


class _ModelJSON(Response):
    """application/json whose body is already serialized."""

    media_type = "application/json"


_TASK_VIEW = TypeAdapter(TaskView)
_TASK_VIEWS = TypeAdapter(list[TaskView])


def _safe(text: str) -> str:
    """Text that JSON-encodes whatever a client sent (lone surrogates escaped)."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def _admissible(service: ProfilerService, req: SubmitRequest) -> None:
    """Every check `service.submit` makes on one request, without creating anything."""
    service._validate(req)
    size = len(req.source_text().encode())
    if size > service.config.max_source_bytes:
        raise TooLarge(f"source is {size} bytes; limit {service.config.max_source_bytes}")
    timeout_s = req.timeout_s or service.config.default_timeout_s
    if timeout_s > service.config.max_timeout_s:
        raise ServiceError(f"timeout_s {timeout_s:g} exceeds the limit {service.config.max_timeout_s:g}")


def _require_room(service: ProfilerService, n: int) -> None:
    pending = service.dispatcher.pending_count()
    if pending + n > service.config.max_pending:
        raise Busy(f"queue full ({pending} pending, {n} more asked, limit {service.config.max_pending}); retry later")


def _require_usable_gpu(service: ProfilerService) -> None:
    """503 unless some GPU will run the task (a drained or failed one would leave it pending)."""
    lanes = [lane.view() for lane in service.lanes.values()]
    if any(v.state in USABLE_LANES for v in lanes):
        return
    why = "; ".join(f"GPU {v.gpu} {v.state.value}" + (f" ({', '.join(v.reasons)})" if v.reasons else "")
                    for v in lanes)
    raise Busy(f"no usable GPU ({why}); retry later")


def _submitter(service: ProfilerService, kind: TaskKind):
    async def submit(req: SubmitRequest) -> SubmitResponse:
        _admissible(service, req)
        _require_usable_gpu(service)
        return service.submit(kind, req)

    submit.__name__ = f"submit_{kind.value}"
    return submit


def _problem(service: ProfilerService, name: str):
    problem = service.catalog.get(name)
    if problem is None:
        raise NotFound(f"unknown definition {name!r}")
    return problem
