"""Checks of a campaign that need no model call, run before anything is created or started.

Order matters: the grid is sized by arithmetic first (instant, whatever `trajectories` says), and only then
is litellm imported (seconds) to check providers. Errors raise CampaignConfigError (one line naming the key);
what only may be wrong comes back as warnings.

API key variables named by `api_key_env`: unset is an error for `campaign run` (`keys_required=True`) and a
warning for `campaign validate`, which checks the file (a file validated on a machine without the keys, such
as CI, is still a valid file). A key variable that is not the provider's is an error for both; an address the
user has not allowed outside the file (`ptxcore.agent.endpoints`) is an error for `run`, a warning for `validate`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from pydantic import Field

from ptxcore.schema import FrozenModel

from .campaign import CampaignConfig, CampaignConfigError, ModelSpec
from .endpoints import EndpointError, allowed_endpoints, check_model_access, check_route, check_tracking_uri
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


def _check_litellm(spec: ModelSpec, where: str) -> tuple[str, list[str]]:
    from .llm import UnknownProviderError, check_provider, model_warnings

    try:
        provider = check_provider(spec.model, spec.api_base)
    except UnknownProviderError as exc:
        raise CampaignConfigError(f"{where}.model: {exc}") from exc
    return provider, [f"{where}: {w}" for w in model_warnings(spec.model, spec.api_base, spec.context_window_tokens,
                                                              spec.api_key_env)]


def check_access(spec: ModelSpec, where: str, provider: str, addresses_required: bool = True,
                 env: Mapping[str, str] | None = None) -> list[str]:
    """The spec's key variable (always an error when it is not the provider's) and server (an error, or with
    `addresses_required=False` a warning, when the user has not allowed it outside the file)."""
    allowed = allowed_endpoints(env)
    try:
        check_model_access(where, provider, spec.api_base, spec.api_key_env, allowed)
    except EndpointError as exc:
        if addresses_required or ".api_base:" not in str(exc):
            raise CampaignConfigError(str(exc)) from None
        try:  # the key variable is checked as if the address were allowed
            check_model_access(where, provider, spec.api_base, spec.api_key_env, (spec.api_base or "",))
        except EndpointError as key_exc:
            raise CampaignConfigError(str(key_exc)) from None
        return [f"{exc} (campaign run refuses it)"]
    return []


def address_problems(config: CampaignConfig, env: Mapping[str, str] | None = None,
                     mlflow_from_file: bool = True) -> list[str]:
    """The file's profiling-service URLs and MLflow server that the user has not allowed outside it."""
    allowed = allowed_endpoints(env)
    problems = []
    for arch, route in config.profilers.items():
        try:
            check_route(f"profilers.{arch}", route, allowed)
        except EndpointError as exc:
            problems.append(str(exc))
    if mlflow_from_file:
        try:
            check_tracking_uri("mlflow_tracking_uri", config.mlflow_tracking_uri, allowed)
        except EndpointError as exc:
            problems.append(str(exc))
    return problems


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
                provider = REPLAY_PREFIX.rstrip("/")
            else:
                provider, more = _check_litellm(spec, key)
                warnings += more
            warnings += check_access(spec, key, provider, addresses_required=keys_required, env=env)
            warnings += _check_key(spec, key, env, keys_required)
        if not keys_required:  # `campaign run` checks these on the file itself (flows.campaign.resolve_config)
            warnings += [f"{p} (campaign run refuses it)" for p in address_problems(config, env)]
    except CampaignConfigError as exc:
        if not where:
            raise
        message = str(exc)
        raise CampaignConfigError(f"{locate(where, text, message.split(':', 1)[0])}: {message}") from exc
    return PreflightReport(grid=grid, variants=variants, warnings=warnings)
