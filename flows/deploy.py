"""Scheduled campaigns: a deployment of the campaign flow with a cron schedule on a process work pool.

Equivalent to `prefect deploy --all` with the repository's prefect.yaml; needs a long-lived Prefect
server (`prefect server start`, PREFECT_API_URL set) and a worker (`prefect worker start --pool ...`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from uuid import UUID

from prefect.client.orchestration import get_client
from prefect.client.schemas.actions import WorkPoolCreate
from prefect.exceptions import ObjectNotFound

from ptxcore.agent import load_campaign

REPO_ROOT = Path(__file__).resolve().parents[1]
ENTRYPOINT = "flows/campaign.py:campaign_flow"


class DeployError(RuntimeError):
    """The deployment could not be created (bad cron, wrong pool type, no server)."""


@dataclass(frozen=True)
class DeployResult:
    deployment_id: UUID
    flow_name: str
    name: str
    pool: str
    cron: str


def ensure_process_pool(pool: str) -> None:
    """Create the work pool (type process) when missing; refuse a pool of another type."""
    with get_client(sync_client=True) as client:
        try:
            existing = client.read_work_pool(pool)
        except ObjectNotFound:
            client.create_work_pool(WorkPoolCreate(name=pool, type="process"))
            return
    if existing.type != "process":
        raise DeployError(f"work pool {pool!r} has type {existing.type!r}, expected 'process'")


def _check_cron(cron: str) -> None:
    from prefect.client.schemas.schedules import CronSchedule

    try:
        CronSchedule(cron=cron)
    except ValueError as exc:
        raise DeployError(f"--cron {cron!r}: {str(exc).splitlines()[-1]}") from exc


def deploy_campaign(config_path: str, name: str | None = None, cron: str = "0 3 * * *",
                    pool: str = "ptxbench-process") -> DeployResult:
    """Create or update the deployment; parameters point at the campaign file inside the repository."""
    from flows.campaign import campaign_flow

    config, _ = load_campaign(config_path)
    _check_cron(cron)
    path = Path(config_path).resolve()  # the worker runs on this host and sees the same path
    ensure_process_pool(pool)
    flow = campaign_flow.from_source(source=str(REPO_ROOT), entrypoint=ENTRYPOINT)
    deployment_name = name or config.id
    deployment_id = flow.deploy(
        name=deployment_name, work_pool_name=pool, cron=cron, parameters={"config_path": str(path)},
        description=f"PTXBench campaign {config.id} ({config_path})", tags=["ptxbench", f"campaign:{config.id}"],
        print_next_steps=False,
    )
    return DeployResult(deployment_id=deployment_id, flow_name=campaign_flow.name, name=deployment_name,
                        pool=pool, cron=cron)
