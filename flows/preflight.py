"""Everything a campaign run checks before it creates anything (warehouse, MLflow run, directories, server).

`ptxcore.agent.preflight` checks the file (grid, replay libraries, litellm providers, API key variables);
here, what needs a warehouse: the campaigns that `replay/warehouse:<campaign>` models re-serve.
"""

from __future__ import annotations

import os
from pathlib import Path

from ptxcore.agent import CampaignConfig, CampaignConfigError
from ptxcore.agent.preflight import PreflightReport, preflight
from ptxcore.agent.replay import WAREHOUSE_PREFIX
from ptxcore.schema import CampaignRecord, text_sha256
from ptxcore.warehouse import Warehouse, WarehouseError

from .replay import REPLAY_WAREHOUSE_ENV


def check_warehouse_replays(config: CampaignConfig, own_warehouse: Path) -> None:
    """Each `replay/warehouse:<id>` source campaign has recorded turns in the warehouse it is read from."""
    other = os.environ.get(REPLAY_WAREHOUSE_ENV)
    for i, spec in enumerate(config.models):
        name = spec.model.removeprefix("replay/")
        if not (spec.model.startswith("replay/") and name.startswith(WAREHOUSE_PREFIX)):
            continue
        source_id = name.removeprefix(WAREHOUSE_PREFIX)
        path = Path(other) if other else own_warehouse
        where = f"models.{i}.model: {spec.model}"
        if not path.is_file():
            raise CampaignConfigError(f"{where}: no warehouse at {path} to replay from (set {REPLAY_WAREHOUSE_ENV})")
        try:
            with Warehouse(path, read_only=True) as wh:
                recorded = wh.sql("SELECT count(*) FROM turns WHERE campaign_id = ?", [source_id])[1][0][0]
        except WarehouseError as exc:
            raise CampaignConfigError(f"{where}: {exc}") from exc
        if not recorded:
            raise CampaignConfigError(f"{where}: campaign {source_id!r} has no recorded turns in {path}")


NEW_ID_HINT = "--campaign-id NEW"


def same_campaign_problem(campaign_id: str, earlier: CampaignRecord | None, text: str,
                          new_id: str = NEW_ID_HINT) -> str | None:
    """Why a run of `text` may not continue the recorded campaign `earlier` of id `campaign_id` (None: it may; a
    recorded campaign without a configuration hash, imported data, is never continued)."""
    if earlier is None or earlier.config_sha256 == text_sha256(text):
        return None
    recorded = earlier.config_sha256[:12] if earlier.config_sha256 is not None else "none recorded"
    return (f"campaign_id {campaign_id!r} is already recorded with a different configuration (sha256 {recorded}, "
            f"this file {text_sha256(text)[:12]}): resume it with the same file, or give this one another id ({new_id})")


def check_same_campaign(config: CampaignConfig, text: str, own_warehouse: Path, new_id: str = NEW_ID_HINT) -> None:
    """A recorded campaign of this id must have been run from the same file (text hash): a different file with the
    same id would merge its rows into the first campaign and replace its stored config."""
    if not own_warehouse.is_file():
        return
    try:
        with Warehouse(own_warehouse, read_only=True) as wh:
            earlier = wh.campaign(config.id)
    except WarehouseError as exc:
        raise CampaignConfigError(f"{own_warehouse}: {exc}") from exc
    problem = same_campaign_problem(config.id, earlier, text, new_id)
    if problem:
        raise CampaignConfigError(problem)


def preflight_run(config: CampaignConfig, own_warehouse: Path, where: str = "", text: str | None = None) -> PreflightReport:
    """Every check of `campaign run` that needs no model call; raises CampaignConfigError (one line)."""
    report = preflight(config, keys_required=True, where=where, text=text)
    check_warehouse_replays(config, own_warehouse)
    if text is not None:
        check_same_campaign(config, text, own_warehouse)
    return report
