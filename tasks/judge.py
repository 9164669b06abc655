"""The judge task (tag gpu:<arch>): one judgement through whichever backend the campaign's route chose.

Backends and routes live in ptxcore.judge; this module only adapts a judgement to Prefect. Only
infrastructure failures are retried: an INFRA_ERROR verdict (raised as InfraFailure) or an exception
the backend raised (ptxcore.judge.is_infrastructure_failure).
"""

from __future__ import annotations

from typing import Any

from prefect import task
from prefect.cache_policies import NO_CACHE

from ptxcore.arch import get_architecture
from ptxcore.compile import CompiledCandidate
from ptxcore.judge import InfraFailure, JudgeBackend, is_infrastructure_failure
from ptxcore.problems import get_problem
from ptxcore.schema import EvaluationStatus, JudgeResult, Language

from .states import verdict_outcome


def retry_on_infra(task: Any, task_run: Any, state: Any) -> bool:
    """Prefect retry condition: only infrastructure failures are worth another attempt."""
    exc = state.data if isinstance(state.data, BaseException) else None
    return is_infrastructure_failure(exc)


@task(name="judge", task_run_name="judge {label}", retries=2, retry_delay_seconds=10,
      retry_condition_fn=retry_on_infra, cache_policy=NO_CACHE)
def judge_kernel(backend: JudgeBackend, source: str, compiled: CompiledCandidate, problem: str, arch: str,
                 label: str, language: Language = Language.CUDA) -> JudgeResult:
    """Judge one kernel that passed its CPU stage; INFRA_ERROR raises so that Prefect retries it."""
    result = backend.judge(source, get_problem(problem), get_architecture(arch), compiled=compiled, language=language)
    if result.status is EvaluationStatus.INFRA_ERROR:
        raise InfraFailure(result)
    return verdict_outcome(result.status.value, result.recorded,  # type: ignore[return-value]
                           result.reason or result.status.value, result)
