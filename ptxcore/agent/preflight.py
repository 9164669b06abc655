"""Checks of a campaign that need no model call, run before anything is created or started.

Order matters: the grid is sized by arithmetic first (instant, whatever `trajectories` says), and only then
is litellm imported (seconds) to check providers. Errors raise CampaignConfigError (one line naming the key);
what only may be wrong comes back as warnings.

API key variables named by `api_key_env`: unset is an error for `campaign run` (`keys_required=True`) and a
warning for `campaign validate`, which checks the file (a file validated on a machine without the keys, such
as CI, is still a valid file).
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from pydantic import Field

from ptxcore.schema import FrozenModel

from .campaign import CampaignConfig, CampaignConfigError, ModelSpec
from .plan import GridSize, grid_size, variants_by_arch
from .replay import WAREHOUSE_PREFIX, ReplayError, default_replay_root, load_library
from .yamlfile import locate

REPLAY_PREFIX = "replay/"


class PreflightReport(FrozenModel):
    """What a campaign would run, and what could not be vouched for."""

    grid: GridSize
    """The campaign's grid (computed, not expanded)."""
    variants: dict[str, list[str]]
    """Per architecture key, the prompt variants it runs."""
    warnings: list[str] = Field(default_factory=list)
    """One line each: things that may be wrong (an unmapped model, a provider key not set)."""


def _known_libraries() -> str:
    root = default_replay_root()
    names = sorted(p.name for p in root.iterdir() if p.is_dir()) if root.is_dir() else []
    return ", ".join(names) or "none"


def _check_replay(spec: ModelSpec, where: str, problems: list[str]) -> list[str]:
    """The library must exist and load (error); problems it has no script for fail their trajectories (warning)."""
    name = spec.model.removeprefix(REPLAY_PREFIX)
    if name.startswith(WAREHOUSE_PREFIX):
        return []  # needs the warehouse: checked by the flow (flows/preflight.py) before anything is written
    try:
        library = load_library(name)
    except (ReplayError, ValueError) as exc:
        raise CampaignConfigError(f"{where}.model: {exc} (libraries: {_known_libraries()})") from exc
    missing = sorted(set(problems) - library.problems())
    if not missing:
        return []
    return [f"{where}.model: replay library {name} has no script for {', '.join(missing[:5])}"
            f"{' ...' if len(missing) > 5 else ''} (those trajectories will fail)"]


def _check_litellm(spec: ModelSpec, where: str) -> list[str]:
    from .llm import UnknownProviderError, check_provider, model_warnings

    try:
        check_provider(spec.model, spec.api_base)
    except UnknownProviderError as exc:
        raise CampaignConfigError(f"{where}.model: {exc}") from exc
    return [f"{where}: {w}" for w in model_warnings(spec.model, spec.api_base, spec.context_window_tokens,
                                                    spec.api_key_env)]


def _check_key(spec: ModelSpec, where: str, env: Mapping[str, str], keys_required: bool) -> list[str]:
    if spec.api_key_env is None or env.get(spec.api_key_env):
        return []
    message = f"{where}.api_key_env: environment variable {spec.api_key_env} is not set"
    if keys_required:
        raise CampaignConfigError(message)
    return [message + " (campaign run refuses to start without it)"]


def preflight(config: CampaignConfig, keys_required: bool = True, env: Mapping[str, str] | None = None,
              where: str = "", text: str | None = None) -> PreflightReport:
    """Grid size, replay libraries, litellm providers and API key variables; raises on the first error.

    `where`/`text`: the campaign file's name and text, so that an error reads `file:line: key: problem`.
    """
    env = os.environ if env is None else env
    try:
        variants = variants_by_arch(config)
        grid = grid_size(config, variants)
        problems = config.problem_names()
        warnings: list[str] = []
        for i, spec in enumerate(config.models):
            key = f"models.{i}"
            if spec.model.startswith(REPLAY_PREFIX):
                warnings += _check_replay(spec, key, problems)
            else:
                warnings += _check_litellm(spec, key)
            warnings += _check_key(spec, key, env, keys_required)
    except CampaignConfigError as exc:
        if not where:
            raise
        message = str(exc)
        raise CampaignConfigError(f"{locate(where, text, message.split(':', 1)[0])}: {message}") from exc
    return PreflightReport(grid=grid, variants=variants, warnings=warnings)
