"""The environment's HTTP front (FastAPI), behind the profiling service's guard (Host and Origin checks, the token,
the body-size limit: ptxcore.gpu.service.security), for trainers in another process or on another machine.

  GET    /health                     version, open environments, the judge
  POST   /envs                       EnvCreate -> EnvCreated
  POST   /envs/{env_id}/reset        ResetRequest -> ResetResult
  POST   /envs/{env_id}/step         StepRequest -> StepResult (504 past the step timeout, 503 when the judge could
                                     not judge, 409 out of order)
  POST   /step_many                  BatchRequest -> BatchReply (outcomes in order, failures as StepFailure)
  DELETE /envs/{env_id}

Errors are {"detail": one line}; a 422 never echoes the offending value.
"""

from __future__ import annotations

from fastapi import FastAPI, Path, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.concurrency import run_in_threadpool

from ptxcore.gpu.service.security import GuardMiddleware

from ..batch import FailureKind, StepFailure
from ..build import EnvSpecError
from ..env import EnvStateError
from ..profiles import get_profile
from ..steps import ResetResult, StepResult
from .hub import EnvHub, TooManyEnvs, UnknownEnv
from .models import ENV_ID, BatchReply, BatchRequest, EnvCreate, EnvCreated, ResetRequest, StepRequest

VERSION = "1"
MAX_REQUEST_BYTES = 16 << 20
"""Largest request body (a batch of MAX_BATCH completions)."""
_STATUS = {FailureKind.TIMEOUT: 504, FailureKind.INFRA: 503, FailureKind.STATE: 409, FailureKind.INPUT: 422,
           FailureKind.ERROR: 500}
EnvId = Path(pattern=ENV_ID.pattern, min_length=32, max_length=32)


def _safe(text: str) -> str:
    return text.encode("utf-8", "backslashreplace").decode("utf-8")[:500]


def _errors(api: FastAPI) -> None:
    @api.exception_handler(RequestValidationError)
    async def invalid(_request: Request, exc: RequestValidationError) -> JSONResponse:
        detail = [{"loc": [_safe(str(p)) for p in e.get("loc", ())], "msg": _safe(str(e.get("msg", "")))}
                  for e in exc.errors()]
        return JSONResponse({"detail": detail}, status_code=422)

    for kind, status in ((UnknownEnv, 404), (TooManyEnvs, 429), (EnvStateError, 409), (EnvSpecError, 422),
                         (ValueError, 422)):
        api.add_exception_handler(kind, _reply(status))


def _reply(status: int):
    async def handler(_request: Request, exc: Exception) -> JSONResponse:
        return JSONResponse({"detail": _safe((str(exc).splitlines() or [type(exc).__name__])[0])}, status_code=status)

    return handler


def create_env_app(hub: EnvHub, *, write_token: str, token: str | None = None, host_names: tuple[str, ...] = (),
                   max_bytes: int = MAX_REQUEST_BYTES):
    """The ASGI application: FastAPI wrapped in the guard. Every request but GET/HEAD carries `write_token` (the
    per-start token, or the shared `token`, which then guards every request)."""
    api = FastAPI(title="PTXBench training environment", version=VERSION)
    _errors(api)

    @api.get("/health")
    async def health() -> dict:
        return {"name": "ptxbench-env", "version": VERSION, "run_id": hub.run_id, "envs": hub.count(),
                "max_envs": hub.max_envs, "judge_route": hub.builder.route}

    @api.post("/envs", response_model=EnvCreated, status_code=201)
    def create(req: EnvCreate) -> EnvCreated:
        env_id, env = hub.create(req)
        return EnvCreated(env_id=env_id, reward_spec_sha256=env.spec.reward.sha256)

    @api.post("/envs/{env_id}/reset", response_model=ResetResult)
    def reset(req: ResetRequest, env_id: str = EnvId) -> ResetResult:
        return hub.get(env_id).reset(req.seed, policy_model=req.policy_model)

    @api.post("/envs/{env_id}/step", response_model=None)
    async def step(req: StepRequest, env_id: str = EnvId) -> StepResult | JSONResponse:
        env = hub.get(env_id)
        limit = get_profile(env.spec.profile).step_timeout_s
        outcome = await hub.pool.astep(env, req.completion, limit)
        if isinstance(outcome, StepFailure):
            return JSONResponse({"detail": _safe(outcome.message), "kind": outcome.kind.value},
                                status_code=_STATUS[outcome.kind])
        return outcome

    @api.post("/step_many", response_model=BatchReply)
    async def step_many(req: BatchRequest) -> BatchReply:
        items = [(i.env_id, i.completion) for i in req.items]
        return BatchReply(outcomes=await run_in_threadpool(hub.step_many, items, req.timeout_s))

    @api.delete("/envs/{env_id}", status_code=204)
    async def close(env_id: str = EnvId) -> None:
        hub.close(env_id)

    return GuardMiddleware(api, token=token, max_bytes=max_bytes, write_token=write_token, host_names=host_names)

