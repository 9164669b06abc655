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


def preflight_run(config: CampaignConfig, own_warehouse: Path, where: str = "", text: str | None = None) -> PreflightReport:
    """Every check of `campaign run` that needs no model call; raises CampaignConfigError (one line)."""
    report = preflight(config, keys_required=True, where=where, text=text)
    check_warehouse_replays(config, own_warehouse)
    return report
