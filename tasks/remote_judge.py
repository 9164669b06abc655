"""Judging on other hosts through Prefect task workers (docs/architecture.md, "Scale-out").

Every GPU host runs its profiling service and `ptxbench worker --arch ARCH`: a Prefect task worker that
serves the task `judge-on-<arch>` below and judges with that host's backend (its service URL, its own GPU,
or a plugin). A campaign run with `--profiler ARCH=prefect` (campaign file: `profilers: {hopper: prefect}`)
submits each judgement as a background task run (`Task.delay`) and waits for its result; which host takes
it, backpressure and visibility are Prefect's. The campaign's `judge` task (tag gpu:<arch>) still bounds
the judgements in flight and is the one retry layer: an INFRA_ERROR on the worker raises there.

One task function per architecture: a task worker subscribes by task key, and Prefect derives the key from
the function's name and code, so a Hopper worker never receives Blackwell work.

Parameters and results travel through Prefect's result storage: across hosts set
PREFECT_RESULTS_DEFAULT_STORAGE_BLOCK (or PREFECT_LOCAL_STORAGE_PATH on a shared file system) to storage
that every host reaches, on the campaign host and on the workers alike.
"""

from __future__ import annotations

import logging
import os
import time
from functools import cache
from typing import Any

from prefect import task
from prefect.cache_policies import CachePolicy
from prefect.client.orchestration import get_client

from ptxcore.arch import Architecture, get_architecture
from ptxcore.compile import CompiledCandidate
from ptxcore.judge import BackendFactory, InfraFailure, JudgeBackend, JudgeRoute, RouteKind, select_judge
from ptxcore.judge.route import worker_route
from ptxcore.problems import Problem, get_problem
from ptxcore.schema import EvaluationStatus, JudgeResult, Language

log = logging.getLogger(__name__)


@cache
def worker_backend(arch: str) -> JudgeBackend:
    """The backend a worker process judges with (one per architecture and process), from the route
    `ptxbench worker` put in PTXBENCH_WORKER_JUDGE."""
    return select_judge(worker_route(), arch)


def _judge_here(arch: str, source: str, compiled: CompiledCandidate, problem: str, language: Language) -> JudgeResult:
    backend = worker_backend(arch)
    log.info("judging %s (%s) on %s with %s", problem, Language(language).value, arch, backend.name)
    # the build is reused only where its artifact exists and verifies (the same host); elsewhere rebuilt
    result = backend.judge(source, get_problem(problem), get_architecture(arch), compiled=compiled, language=language)
    if result.status is EvaluationStatus.INFRA_ERROR:
        raise InfraFailure(result)
    return result


class EachTaskRun(CachePolicy):
    """A result key per task run: every judgement runs, and its result is persisted where the campaign host reads it.

    Not NO_CACHE: Prefect's task worker replaces NO_CACHE by DEFAULT (inputs + task source + flow run id), under
    which a second judgement of the same kernel text in one campaign came back `Cached` with the first one's
    verdict, without judging; and the campaign's wait then missed that Cached completion until its timeout
    (tests/hosts/test_two_hosts.py found both)."""

    def compute_key(self, task_ctx: Any, inputs: dict[str, Any], flow_parameters: dict[str, Any],
                    **kwargs: Any) -> str | None:
        return f"judge-task-run-{task_ctx.task_run.id}" if task_ctx else None


EACH_TASK_RUN = EachTaskRun()


@task(name="judge-on-hopper", task_run_name="judge-on-hopper {label}", cache_policy=EACH_TASK_RUN)
def judge_on_hopper(source: str, compiled: CompiledCandidate, problem: str, label: str,
                    language: Language = Language.CUDA) -> JudgeResult:
    """Served by `ptxbench worker --arch hopper`."""
    return _judge_here("hopper", source, compiled, problem, language)


@task(name="judge-on-blackwell", task_run_name="judge-on-blackwell {label}", cache_policy=EACH_TASK_RUN)
def judge_on_blackwell(source: str, compiled: CompiledCandidate, problem: str, label: str,
                       language: Language = Language.CUDA) -> JudgeResult:
    """Served by `ptxbench worker --arch blackwell`."""
    return _judge_here("blackwell", source, compiled, problem, language)


WORKER_TASKS: dict[str, Any] = {"hopper": judge_on_hopper, "blackwell": judge_on_blackwell}


def worker_task(arch: str) -> Any:
    """The task a worker for `arch` serves (ValueError names the architectures that have one)."""
    key = get_architecture(arch).key
    if key not in WORKER_TASKS:
        raise ValueError(f"no worker task for architecture {arch!r}; known: {', '.join(sorted(WORKER_TASKS))}")
    return WORKER_TASKS[key]


class PrefectWorkerJudge:
    """Flow side: hands the judgement to whichever `ptxbench worker --arch ARCH` takes it, and waits."""

    def __init__(self, arch: str, timeout_s: float | None = None) -> None:
        self.arch = get_architecture(arch).key
        self.task = worker_task(self.arch)
        self.timeout_s = timeout_s if timeout_s is not None else float(os.environ.get(
            "PTXBENCH_WORKER_TIMEOUT_S", "7200"))
        self.name = f"prefect-worker:{self.arch}"

    def judge(self, source: str, problem: Problem, arch: Architecture, *, compiled: CompiledCandidate | None = None,
              workload_uuid: str | None = None, language: Language = Language.CUDA) -> JudgeResult:
        label = f"{problem.name}/{(compiled.result.source_sha256 if compiled else 'source')[:12]}"
        future = self.task.delay(source, compiled, problem.name, label, Language(language))
        log.info("judge task %s for %s submitted to `ptxbench worker --arch %s`", future.task_run_id, problem.name,
                 self.arch)
        deadline = time.monotonic() + self.timeout_s
        while True:
            try:
                return future.result(timeout=max(0.0, deadline - time.monotonic()))
            except TimeoutError as exc:  # an infrastructure failure: the judge task's retry condition retries it
                raise TimeoutError(f"no `ptxbench worker --arch {self.arch}` finished judge task "
                                   f"{future.task_run_id} within {self.timeout_s:.0f} s") from exc
            except RuntimeError:
                # Prefect's wait reads the task run once and raises a plain RuntimeError when it has no state
                # yet; a run delayed a moment ago can read so while the server records the worker's first
                # state (CI saw it on the retry of a judgement). Waited out only where the run's state really
                # reads None, and only until the deadline; any other RuntimeError is the judgement's own.
                if not _stateless(future.task_run_id) or time.monotonic() >= deadline:
                    raise
                time.sleep(STATELESS_POLL_S)


STATELESS_POLL_S = 0.2
"""How long the wait pauses when the task run it waits for has no state yet."""


def _stateless(task_run_id: Any) -> bool:
    """Whether the task run reads back with no state (the moment between its creation and its first state)."""
    with get_client(sync_client=True) as client:
        return client.read_task_run(task_run_id).state is None


def prefect_worker_judge(route: JudgeRoute, arch: str) -> PrefectWorkerJudge:
    """The backend of route `prefect` (`profilers: {hopper: prefect}`)."""
    return PrefectWorkerJudge(arch)


SERVED: dict[RouteKind, BackendFactory] = {RouteKind.PREFECT: prefect_worker_judge}
"""The route kinds this module serves, for `select_judge(..., served=SERVED)` (the campaign flow passes it)."""
