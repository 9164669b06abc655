"""A judge backend named by `module:factory` (factory(arch) -> backend); tests use fakes this way."""

from __future__ import annotations

import importlib

from ptxcore.judge.port import JudgeBackend
from ptxcore.judge.route import RouteError


def load_plugin(spec: str, arch: str) -> JudgeBackend:
    module, _, attr = spec.partition(":")
    if not module or not attr:
        raise RouteError(f"judge plugin {spec!r} must look like module:factory")
    try:
        factory = getattr(importlib.import_module(module), attr)
    except (ImportError, AttributeError) as exc:
        raise RouteError(f"judge plugin {spec!r}: {exc}") from exc
    return factory(arch)
