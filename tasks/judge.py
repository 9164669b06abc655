"""The judge task (tag gpu:<arch>) and the judge backends it can call.

Backends, chosen per architecture by `select_judge`:
  * a plugin `module:factory` (tests use a fake judge this way),
  * the profiling service at a URL (`--profiler` / campaign `profilers:`),
  * Prefect task workers on GPU hosts (`profilers: {arch: prefect}`; tasks/remote_judge.py),
  * this host's GPU when it has one of that architecture (ptxcore.gpu.judge_candidate),
  * otherwise NOT_EVALUATED: an explicit verdict with no correctness or timing.
Only infrastructure failures are retried: an INFRA_ERROR verdict or an exception from the backend.
"""

from __future__ import annotations

import importlib
import logging
import os
import shutil
import subprocess
from typing import Any, Protocol

import httpx
from prefect import task
from prefect.cache_policies import NO_CACHE

from ptxcore.agent.evaluation import static_target
from ptxcore.arch import Architecture, get_architecture
from ptxcore.compile import CompiledCandidate
from ptxcore.problems import Problem, get_problem
from ptxcore.schema import EvaluationStatus, JudgeResult, TargetInstructionEvidence

from .states import outcome

log = logging.getLogger(__name__)


class InfraFailure(RuntimeError):
    """The judge returned INFRA_ERROR: our fault, retried, never charged to the model."""

    def __init__(self, result: JudgeResult) -> None:
        super().__init__(f"infrastructure error while judging {result.definition}: {result.reason}")
        self.result = result

    def __reduce__(self) -> tuple:  # pickled across processes (Prefect task workers): rebuild from the result
        return (type(self), (self.result,))


class JudgeBackend(Protocol):
    """Judges one compiled candidate. A bad kernel is a returned verdict; infrastructure failure raises."""

    name: str

    def judge(self, source: str, problem: Problem, arch: Architecture, compiled: CompiledCandidate) -> JudgeResult: ...


class NoGpuJudge:
    """No GPU judge for this architecture: every compiled turn is NOT_EVALUATED (no invented numbers)."""

    def __init__(self, reason: str) -> None:
        self.name = "none"
        self.reason = reason

    def judge(self, source: str, problem: Problem, arch: Architecture, compiled: CompiledCandidate) -> JudgeResult:
        sass = compiled.sass
        evidence = TargetInstructionEvidence(
            status=static_target(sass), static=sass.target_static if sass else None,
            reason="not run: " + self.reason, source_sha256=compiled.result.source_sha256,
            cubin_sha256=compiled.result.cubin_sha256,
        )
        return JudgeResult(status=EvaluationStatus.NOT_EVALUATED, reason=self.reason, definition=problem.name,
                           arch=arch.key, target_instruction=evidence, compile=compiled.result, sass=sass)


class LocalGpuJudge:
    """This host's GPU, through ptxcore.gpu (rebuilds from source with -lcuda)."""

    name = "local-gpu"

    def judge(self, source: str, problem: Problem, arch: Architecture, compiled: CompiledCandidate) -> JudgeResult:
        from ptxcore.gpu import judge_candidate

        return judge_candidate(source, problem, arch)


class ServiceJudge:
    """A profiling service (`ptxbench profiler serve`) over HTTP, through ptxcore.gpu.client.

    The client's own resubmission is off (retries=0): the judge task's Prefect retries are the one
    retry layer. Its failure to reach the service raises ProfilerUnavailable (an infrastructure error).
    """

    def __init__(self, url: str, token: str | None = None, transport: Any = None) -> None:
        from ptxcore.gpu.client import TOKEN_ENV, ProfilerClient

        self.name = f"service:{url}"
        self.url = url
        self.client = ProfilerClient(url, token=token or os.environ.get(TOKEN_ENV) or None, retries=0,
                                     transport=transport)

    def judge(self, source: str, problem: Problem, arch: Architecture, compiled: CompiledCandidate) -> JudgeResult:
        return self.client.evaluate(source, problem.name, arch.key, client_tag="campaign")


_COMPUTE_CAP_ARCH = {"9.0": "hopper", "10.0": "blackwell"}


def local_gpu_archs() -> set[str]:
    """Architecture keys of this host's GPUs (via nvidia-smi; empty without a driver)."""
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return set()
    try:
        out = subprocess.run([smi, "--query-gpu=compute_cap", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return set()
    if out.returncode != 0:
        return set()
    return {_COMPUTE_CAP_ARCH[c.strip()] for c in out.stdout.splitlines() if c.strip() in _COMPUTE_CAP_ARCH}


def load_plugin(spec: str, arch: str) -> JudgeBackend:
    """`module:factory` -> factory(arch)."""
    module, _, attr = spec.partition(":")
    if not module or not attr:
        raise ValueError(f"judge plugin {spec!r} must look like module:factory")
    return getattr(importlib.import_module(module), attr)(arch)


def select_judge(arch: str, profiler_url: str | None = None, plugin: str | None = None) -> JudgeBackend:
    if plugin:
        return load_plugin(plugin, arch)
    if profiler_url == "prefect":  # Prefect task workers on GPU hosts (`ptxbench worker --arch ARCH`)
        from .remote_judge import PrefectWorkerJudge

        return PrefectWorkerJudge(arch)
    if profiler_url:
        return ServiceJudge(profiler_url)
    if arch in local_gpu_archs():
        return LocalGpuJudge()
    return NoGpuJudge(f"no {arch} GPU on this machine and no profiler URL")


def retry_on_infra(task: Any, task_run: Any, state: Any) -> bool:
    """Prefect retry condition: only infrastructure failures are worth another attempt."""
    exc = state.data if isinstance(state.data, BaseException) else None
    infra: tuple[type[BaseException], ...] = (InfraFailure, OSError, TimeoutError, httpx.HTTPError)
    from ptxcore.gpu import InfraError
    from ptxcore.gpu.client import ProfilerUnavailable

    return isinstance(exc, infra + (InfraError, ProfilerUnavailable))


@task(name="judge", task_run_name="judge {label}", retries=2, retry_delay_seconds=10,
      retry_condition_fn=retry_on_infra, cache_policy=NO_CACHE)
def judge_kernel(backend: JudgeBackend, source: str, compiled: CompiledCandidate, problem: str, arch: str,
                 label: str) -> JudgeResult:
    """Judge one compiled kernel; INFRA_ERROR raises so that Prefect retries it."""
    result = backend.judge(source, get_problem(problem), get_architecture(arch), compiled)
    if result.status is EvaluationStatus.INFRA_ERROR:
        raise InfraFailure(result)
    return outcome(result.status.value, result.reason or result.status.value, result)  # type: ignore[return-value]
