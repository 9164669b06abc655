"""A profiling service (`ptxbench profiler serve`) over HTTP, through its client.

The client's own resubmission is off (retries=0) in campaigns: the judge task's Prefect retries are the
one retry layer. Failing to reach the service raises ProfilerUnavailable (an infrastructure failure).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ptxcore.schema import Language

if TYPE_CHECKING:
    from ptxcore.arch import Architecture
    from ptxcore.compile import CompiledCandidate
    from ptxcore.problems import Problem
    from ptxcore.schema import JudgeResult


class ServiceJudge:
    def __init__(self, url: str, token: str | None = None, transport: Any = None, retries: int = 0,
                 client_tag: str = "campaign") -> None:
        from ptxcore.gpu.service.client import ProfilerClient

        self.name = f"service:{url}"
        self.url = url
        self.client_tag = client_tag
        # token None: the client finds it (a loopback service's per-start token file, else $PTXBENCH_PROFILER_TOKEN)
        self.client = ProfilerClient(url, token=token, retries=retries, transport=transport)

    def judge(self, source: str, problem: Problem, arch: Architecture, *, compiled: CompiledCandidate | None = None,
              workload_uuid: str | None = None, language: Language = Language.CUDA) -> JudgeResult:
        return self.client.evaluate(source, problem.name, arch.key, workload_uuid=workload_uuid,
                                    client_tag=self.client_tag, language=Language(language).value)
