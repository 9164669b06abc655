"""Judge routes: which backend judges an architecture's candidates. Parsed once, here, from whichever of the
command line, the campaign file and the environment names one.

Spellings (the same everywhere: `--profiler`, `profilers:` in a campaign file, `PTXBENCH_WORKER_JUDGE`):
    auto                  this host's GPU when it has one of the architecture, else NOT_EVALUATED (default)
    local                 this host's GPU (an error where there is none)
    none                  no GPU judge: compiled turns are NOT_EVALUATED
    http(s)://HOST:PORT   a profiling service (`ptxbench profiler serve`)
    prefect               Prefect task workers on GPU hosts (`ptxbench worker --arch ARCH`)
    recorded:PATH         verdicts recorded on a GPU earlier (a FlashInfer-Trace folder), reused by kernel hash
    plugin:module:factory a backend factory(arch) (tests use fakes this way)

Precedence when several name a route for an architecture: an explicit plugin (`--judge-plugin`,
PTXBENCH_JUDGE_PLUGIN) > the command line > the campaign file > auto.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum

PLUGIN_ENV = "PTXBENCH_JUDGE_PLUGIN"
"""`module:factory` judge backend for every architecture (tests; never needed in production)."""
WORKER_JUDGE_ENV = "PTXBENCH_WORKER_JUDGE"
"""Set by `ptxbench worker`: the route the worker's own judgements take on its host."""


class RouteError(ValueError):
    """A judge route that cannot be parsed or served; the message names the bad value."""


class RouteKind(StrEnum):
    AUTO = "auto"
    LOCAL = "local"
    NONE = "none"
    SERVICE = "service"
    PREFECT = "prefect"
    RECORDED = "recorded"
    PLUGIN = "plugin"


_BARE = {"auto": RouteKind.AUTO, "local": RouteKind.LOCAL, "none": RouteKind.NONE, "prefect": RouteKind.PREFECT}


@dataclass(frozen=True)
class JudgeRoute:
    """One parsed route. `target`: the URL, recorded folder or `module:factory` (None for the bare kinds)."""

    kind: RouteKind
    target: str | None = None

    @classmethod
    def parse(cls, text: str) -> JudgeRoute:
        value = text.strip()
        if value.lower() in _BARE:
            return cls(_BARE[value.lower()])
        if value.startswith(("http://", "https://")):
            if len(value.split("://", 1)[1].strip("/")) == 0:
                raise RouteError(f"judge route {text!r}: the URL has no host")
            return cls(RouteKind.SERVICE, value.rstrip("/"))
        head, sep, rest = value.partition(":")
        if sep and head == "recorded" and rest:
            return cls(RouteKind.RECORDED, rest)
        if sep and head == "plugin" and _is_factory(rest):
            return cls(RouteKind.PLUGIN, rest)
        raise RouteError(f"judge route {text!r}: expected auto, local, none, prefect, an http(s) URL, "
                         "recorded:PATH or plugin:module:factory")

    def __str__(self) -> str:
        if self.kind is RouteKind.SERVICE:
            return str(self.target)
        return f"{self.kind.value}:{self.target}" if self.target else self.kind.value


def _is_factory(spec: str) -> bool:
    module, sep, attr = spec.partition(":")
    return bool(sep and module and attr and all(p.isidentifier() for p in module.split(".")) and attr.isidentifier())


def plugin_route(spec: str) -> JudgeRoute:
    """A bare `module:factory` (the --judge-plugin option, PTXBENCH_JUDGE_PLUGIN)."""
    if not _is_factory(spec):
        raise RouteError(f"judge plugin {spec!r} must look like module:factory")
    return JudgeRoute(RouteKind.PLUGIN, spec)


def parse_cli_routes(values: Iterable[str] | None) -> dict[str, JudgeRoute]:
    """`--profiler ROUTE` (every architecture) or `--profiler ARCH=ROUTE`, repeatable; key `*` = every one."""
    from ptxcore.arch import get_architecture

    out: dict[str, JudgeRoute] = {}
    for v in values or []:
        arch, sep, rest = v.partition("=")
        if sep and "://" not in arch and ":" not in arch:
            out[get_architecture(arch).key] = JudgeRoute.parse(rest)
        else:
            out["*"] = JudgeRoute.parse(v)
    return out


def parse_file_routes(profilers: Mapping[str, str]) -> dict[str, JudgeRoute]:
    """A campaign file's `profilers:` mapping (architecture -> route)."""
    from ptxcore.arch import get_architecture

    return {get_architecture(a).key if a != "*" else "*": JudgeRoute.parse(r) for a, r in profilers.items()}


def resolve_routes(architectures: Iterable[str], *, cli: Mapping[str, JudgeRoute] | None = None,
                   campaign: Mapping[str, JudgeRoute] | None = None, plugin: str | None = None,
                   env: Mapping[str, str] | None = None) -> dict[str, JudgeRoute]:
    """THE decision: the route of every architecture, by the precedence in this module's docstring."""
    env = os.environ if env is None else env
    plugin = plugin or env.get(PLUGIN_ENV) or None
    out: dict[str, JudgeRoute] = {}
    for arch in architectures:
        if plugin:
            out[arch] = plugin_route(plugin)
            continue
        for table in (cli or {}, campaign or {}):
            route = table.get(arch) or table.get("*")
            if route is not None:
                out[arch] = route
                break
        else:
            out[arch] = JudgeRoute(RouteKind.AUTO)
    return out


def worker_route(env: Mapping[str, str] | None = None) -> JudgeRoute:
    """The route of a `ptxbench worker`'s own judgements (its host's service, GPU, or a plugin), from
    PTXBENCH_WORKER_JUDGE in the spellings above (a plugin as `plugin:module:factory`)."""
    env = os.environ if env is None else env
    spec = env.get(WORKER_JUDGE_ENV, "").strip()
    if not spec:
        return JudgeRoute(RouteKind.AUTO)
    route = JudgeRoute.parse(spec)
    if route.kind is RouteKind.PREFECT:
        raise RouteError(f"judge route {spec!r}: a worker cannot hand its judgements to other workers")
    return route
