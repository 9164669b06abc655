"""Model clients of a campaign, and loading `replay/warehouse:<campaign>` sources from a warehouse."""

from __future__ import annotations

import os
from pathlib import Path

from ptxcore.agent import CampaignConfig, CampaignConfigError, ModelSpec
from ptxcore.agent.endpoints import EndpointError, allowed_endpoints, check_model_access
from ptxcore.agent.llm import LiteLLMClient, UnknownProviderError, check_provider
from ptxcore.agent.replay import WAREHOUSE_PREFIX, WarehouseReplay, register_source
from ptxcore.agent.types import LLMClient
from ptxcore.warehouse import Warehouse

from .writer import RecordWriter

REPLAY_WAREHOUSE_ENV = "PTXBENCH_REPLAY_WAREHOUSE"
"""Warehouse holding the campaigns that `replay/warehouse:<campaign>` re-serves (default: the campaign's own)."""


def make_client_check(spec: ModelSpec, where: str) -> None:
    """The spec's key variable must be one of its provider's, and its server the provider's own or allowed outside
    the file (ptxcore.agent.endpoints); CampaignConfigError `where.field: problem` otherwise."""
    try:
        provider = "replay" if spec.model.startswith("replay/") else check_provider(spec.model, spec.api_base)
        check_model_access(where, provider, spec.api_base, spec.api_key_env, allowed_endpoints())
    except (EndpointError, UnknownProviderError) as exc:
        raise CampaignConfigError(str(exc)) from None


def make_client(spec: ModelSpec, where: str) -> LLMClient:
    """A litellm client for one model spec; its API key comes from the environment variable the spec names
    (`make_client_check` first, here where the key is read: a recipe or a repair campaign reaches this without
    a campaign preflight)."""
    make_client_check(spec, where)
    api_key = None
    if spec.api_key_env:
        api_key = os.environ.get(spec.api_key_env)
        if not api_key:
            raise CampaignConfigError(f"{where}.api_key_env: environment variable {spec.api_key_env} is not set")
    return LiteLLMClient(spec.model, decoding=spec.decoding, api_base=spec.api_base, api_key=api_key,
                         context_window_tokens=spec.context_window_tokens)


def make_clients(config: CampaignConfig) -> dict[str, LLMClient]:
    """One litellm client per model of the campaign."""
    return {spec.name: make_client(spec, f"models.{i}") for i, spec in enumerate(config.models)}


def _load(wh: Warehouse, source_id: str) -> WarehouseReplay:
    return WarehouseReplay(source_id, wh.trajectories(source_id), wh.turns(source_id))


def register_warehouse_replays(config: CampaignConfig, writer: RecordWriter, own_warehouse: Path) -> None:
    """Load every `replay/warehouse:<id>` model's source campaign before the first call."""
    other = os.environ.get(REPLAY_WAREHOUSE_ENV)
    for spec in config.models:
        name = spec.model.removeprefix("replay/")
        if not (spec.model.startswith("replay/") and name.startswith(WAREHOUSE_PREFIX)):
            continue
        source_id = name.removeprefix(WAREHOUSE_PREFIX)
        if other and Path(other).resolve() != own_warehouse:
            with Warehouse(Path(other), read_only=True) as wh:
                source = _load(wh, source_id)
        else:
            source = writer.call(lambda wh, tr, sid=source_id: _load(wh, sid))
        register_source(name, source)
