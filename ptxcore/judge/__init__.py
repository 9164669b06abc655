"""ptxcore.judge: who judges a candidate, and how a judge's answer is shaped.

  port.py      JudgeBackend: the one interface every backend has
  route.py     JudgeRoute / RouteKind and `resolve_routes`: THE place where the judge route is decided,
               from the command line, the campaign file and the environment
  select.py    select_judge(route, arch): the backend for a route (a caller passes the factories of kinds
               served outside ptxcore: the campaign flow passes the Prefect task workers')
  backends/    none (the CPU stages; the only producer of NOT_EVALUATED), local GPU, profiling service,
               plugin, recorded verdicts
  errors.py    InfraFailure and the exceptions that count as infrastructure failures

The fold rules (compile status -> verdict; static SASS -> target instruction) live on the schema types
(`CompileStatus.verdict`, `StaticTarget.instruction`). Light: no torch or cupy at import.
"""

from ptxcore.judge.backends.local import LocalGpuJudge
from ptxcore.judge.backends.none import NO_GPU_REASON, NoGpuJudge, cpu_stages
from ptxcore.judge.backends.plugin import load_plugin
from ptxcore.judge.backends.service import ServiceJudge
from ptxcore.judge.errors import InfraFailure, is_infrastructure_failure
from ptxcore.judge.port import JudgeBackend
from ptxcore.judge.route import JudgeRoute, RouteError, RouteKind, resolve_routes
from ptxcore.judge.select import BackendFactory, select_judge

__all__ = [
    "JudgeBackend", "JudgeRoute", "RouteKind", "RouteError", "resolve_routes", "select_judge", "BackendFactory",
    "InfraFailure", "is_infrastructure_failure", "NoGpuJudge", "NO_GPU_REASON", "cpu_stages", "LocalGpuJudge",
    "ServiceJudge", "load_plugin",
]
