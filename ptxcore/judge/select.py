"""select_judge(route, arch): the one place a route becomes a backend."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from ptxcore.judge.port import JudgeBackend
from ptxcore.judge.route import JudgeRoute, RouteError, RouteKind

if TYPE_CHECKING:
    from ptxcore.gpu.config import JudgeConfig

log = logging.getLogger(__name__)

BackendFactory = Callable[[JudgeRoute, str], JudgeBackend]
"""Builds the backend of a route kind served outside ptxcore: (route, architecture key) -> backend."""


def select_judge(route: JudgeRoute, arch: str, config: JudgeConfig | None = None, recorded: str | None = None,
                 *, served: Mapping[RouteKind, BackendFactory] | None = None) -> JudgeBackend:
    """The backend that serves `route` for architecture `arch` (RouteError when it cannot be served).

    `recorded`: a recorded-verdict folder that route `auto` falls back to where this host has no GPU of
    the architecture (the demo campaign ships one), instead of plain NOT_EVALUATED. `served`: factories of
    the route kinds whose backends live outside ptxcore, passed by the caller that has them (the campaign
    flow passes tasks.remote_judge's for `prefect`); nothing registers itself on import."""
    from ptxcore.judge.backends.local import LocalGpuJudge
    from ptxcore.judge.backends.none import NoGpuJudge

    kind = route.kind
    if kind in (RouteKind.AUTO, RouteKind.LOCAL):
        from ptxcore.gpu.probe import gpu_architectures

        if arch in gpu_architectures():
            return LocalGpuJudge(config)
        if kind is RouteKind.LOCAL:
            raise RouteError(f"judge route 'local': this machine has no {arch} GPU")
        if recorded:
            from ptxcore.judge.backends.recorded import RecordedJudge

            return RecordedJudge.open(recorded, arch, config)
        return NoGpuJudge(f"no {arch} GPU on this machine and no profiler URL", config)
    if kind is RouteKind.NONE:
        return NoGpuJudge(f"judging disabled for {arch} (route 'none')", config)
    if kind is RouteKind.SERVICE:
        from ptxcore.judge.backends.service import ServiceJudge

        return ServiceJudge(str(route.target))
    if kind is RouteKind.PLUGIN:
        from ptxcore.judge.backends.plugin import load_plugin

        return load_plugin(str(route.target), arch)
    if kind is RouteKind.RECORDED:
        from ptxcore.judge.backends.recorded import RecordedJudge

        return RecordedJudge.open(str(route.target), arch, config)
    if served and kind in served:
        return served[kind](route, arch)
    raise RouteError(f"judge route {route}: not served in this process (Prefect task workers are reached from a "
                     "campaign run)")
