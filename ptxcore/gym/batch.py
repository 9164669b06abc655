"""Many environments' steps at once: `EnvPool.step_many` (in order) and `EnvPool.as_completed` (asyncio, as they
finish), each step with its own timeout.

A step is a blocking call into the judge seam (the profiling service client's submit and long-poll, a local GPU
judge, recorded verdicts), so the pool runs steps on threads: `max_in_flight` of them at once, and the judge's own
GPU-tagged bound (EnvBuilder's `gpu_slots`, as a campaign's gpu_slots) inside that. A step's timeout counts from
when it starts running, not while it waits for a thread; a step past it is a StepFailure(TIMEOUT), its environment
is abandoned (the episode ends as ERROR and needs a reset) and its late result is dropped. Failures are returned,
never raised, so one environment's trouble never loses the others' steps.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from enum import StrEnum

from pydantic import Field

from ptxcore.judge import is_infrastructure_failure
from ptxcore.schema import FrozenModel

from .env import EnvStateError, KernelEnv
from .steps import StepResult

log = logging.getLogger(__name__)
POLL_S = 0.05
"""How often step_many looks for steps that started (their timeouts count from then)."""


class FailureKind(StrEnum):
    """Why a step of a batch has no result."""

    TIMEOUT = "timeout"
    """It ran past its timeout (the environment was abandoned)."""
    INFRA = "infra"
    """The judge could not judge (INFRA_ERROR, the service unreachable): not the policy's fault; repeat the step."""
    STATE = "state"
    """The environment was not ready for a step (not reset, ended, abandoned)."""
    INPUT = "input"
    """The completion was refused (too long)."""
    ERROR = "error"
    """Anything else (a bug: logged with its traceback)."""


class StepFailure(FrozenModel):
    """A step of a batch that produced no StepResult."""

    index: int = Field(ge=0)
    """Its position in the batch."""
    kind: FailureKind
    """Why."""
    message: str = Field(max_length=2000)
    """One line."""


StepOutcome = StepResult | StepFailure


def _failure(index: int, exc: BaseException) -> StepFailure:
    if isinstance(exc, EnvStateError):
        kind = FailureKind.STATE
    elif is_infrastructure_failure(exc):
        kind = FailureKind.INFRA
    elif isinstance(exc, ValueError):
        kind = FailureKind.INPUT
    else:
        kind = FailureKind.ERROR
        log.error("step %d failed", index, exc_info=exc)
    text = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
    return StepFailure(index=index, kind=kind, message=text[:2000])


class EnvPool:
    """Runs steps of many environments concurrently (module docstring)."""

    def __init__(self, max_in_flight: int = 16, step_timeout_s: float | None = None) -> None:
        if max_in_flight < 1:
            raise ValueError("max_in_flight must be >= 1")
        self.step_timeout_s = step_timeout_s
        self._pool = ThreadPoolExecutor(max_workers=max_in_flight, thread_name_prefix="ptxbench-env-step")

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)

    def __enter__(self) -> EnvPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @staticmethod
    def _run(env: KernelEnv, completion: str, started: list[float], on_start=None) -> StepResult:
        started.append(time.monotonic())
        if on_start is not None:
            on_start()
        return env.step(completion)

    def _timeout(self, timeout_s: float | None) -> float | None:
        return timeout_s if timeout_s is not None else self.step_timeout_s

    def step_many(self, steps: Sequence[tuple[KernelEnv, str]], timeout_s: float | None = None) -> list[StepOutcome]:
        """Every (environment, completion) stepped concurrently; outcomes in the order given."""
        limit = self._timeout(timeout_s)
        started: list[list[float]] = [[] for _ in steps]
        futures: dict[Future, int] = {self._pool.submit(self._run, env, c, started[i]): i
                                      for i, (env, c) in enumerate(steps)}
        out: list[StepOutcome | None] = [None] * len(steps)
        pending = set(futures)
        while pending:
            done, pending = wait(pending, timeout=POLL_S if limit is not None else None, return_when=FIRST_COMPLETED)
            for future in done:
                i = futures[future]
                exc = future.exception()
                out[i] = _failure(i, exc) if exc is not None else future.result()
            if limit is None:
                continue
            now = time.monotonic()
            for future in [f for f in pending if started[futures[f]] and now - started[futures[f]][0] > limit]:
                i = futures[future]
                steps[i][0].abandon()
                out[i] = StepFailure(index=i, kind=FailureKind.TIMEOUT, message=f"step ran past {limit:g} s")
                pending.discard(future)
        return out  # type: ignore[return-value]

    async def astep(self, env: KernelEnv, completion: str, timeout_s: float | None = None,
                    index: int = 0) -> StepOutcome:
        """One step without blocking the event loop."""
        loop = asyncio.get_running_loop()
        began = asyncio.Event()
        limit = self._timeout(timeout_s)
        future = loop.run_in_executor(self._pool, self._run, env, completion, [],
                                      lambda: loop.call_soon_threadsafe(began.set))
        try:
            waiter = asyncio.ensure_future(began.wait())
            await asyncio.wait({waiter, future}, return_when=asyncio.FIRST_COMPLETED)
            waiter.cancel()
            return await asyncio.wait_for(asyncio.shield(future), limit)
        except TimeoutError:
            env.abandon()
            return StepFailure(index=index, kind=FailureKind.TIMEOUT, message=f"step ran past {limit:g} s")
        except Exception as exc:  # noqa: BLE001 - returned as a failure (module docstring)
            return _failure(index, exc)

    async def as_completed(self, steps: Sequence[tuple[KernelEnv, str]],
                           timeout_s: float | None = None) -> AsyncIterator[tuple[int, StepOutcome]]:
        """Every (environment, completion) stepped concurrently; yields (index, outcome) as each finishes."""
        async def one(i: int, env: KernelEnv, completion: str) -> tuple[int, StepOutcome]:
            return i, await self.astep(env, completion, timeout_s, index=i)

        for next_done in asyncio.as_completed([one(i, e, c) for i, (e, c) in enumerate(steps)]):
            yield await next_done

