"""Prefect tag concurrency limits: gpu:<arch> (judge slots), llm:<provider> (model calls), compile (nvcc).

A misspelled or missing limit silently limits nothing, so every limit is created when missing, set
to the configured value, and then read back from the server — both the tag limit and the global
limit `tag:<tag>` that Prefect's task engine actually acquires — before any task runs.
"""

from __future__ import annotations

import logging

from prefect.client.orchestration import get_client
from prefect.client.schemas.actions import GlobalConcurrencyLimitUpdate
from prefect.exceptions import ObjectNotFound
from prefect.settings import PREFECT_API_URL

from ptxcore.agent import CampaignConfig, TrajectoryPlan
from ptxcore.agent.llm import provider_of
from tasks.compile import COMPILE_TAG

log = logging.getLogger(__name__)


class ConcurrencyLimitError(RuntimeError):
    """A tag limit could not be created or does not read back as configured."""


def gpu_tag(arch: str) -> str:
    return f"gpu:{arch}"


def llm_tag(model: str) -> str:
    return f"llm:{provider_of(model)}"


def wanted_limits(config: CampaignConfig, plans: list[TrajectoryPlan]) -> dict[str, int]:
    """Tag -> slots for this campaign."""
    limits: dict[str, int] = {COMPILE_TAG: config.concurrency.compile}
    for arch in config.architectures:
        limits[gpu_tag(arch)] = config.concurrency.gpu_slots.get(arch, 1)
    for plan in plans:
        tag = llm_tag(plan.model.model)
        limits[tag] = min(limits.get(tag, plan.model.concurrency), plan.model.concurrency)
    return limits


def _read(client, tag: str) -> tuple[int | None, int | None, bool]:
    """(tag limit, global limit, global active) as the server has them."""
    try:
        legacy = client.read_concurrency_limit_by_tag(tag).concurrency_limit
    except ObjectNotFound:
        legacy = None
    try:
        gcl = client.read_global_concurrency_limit_by_name(f"tag:{tag}")
        return legacy, gcl.limit, bool(gcl.active)
    except ObjectNotFound:
        return legacy, None, False


def ephemeral_api() -> bool:
    """No PREFECT_API_URL: this process runs Prefect's temporary local server."""
    return not PREFECT_API_URL.value()


def _clear_stale_slots(client, tag: str) -> None:
    """A temporary local server runs no lease repossessor, so slots of a killed run stay taken: free them."""
    try:
        gcl = client.read_global_concurrency_limit_by_name(f"tag:{tag}")
    except ObjectNotFound:
        return
    if gcl.active_slots:
        log.warning("concurrency limit %s: freeing %d slots left by an earlier run", tag, gcl.active_slots)
        client.update_global_concurrency_limit(f"tag:{tag}", GlobalConcurrencyLimitUpdate(active_slots=0))


def ensure_limits(limits: dict[str, int], clear_stale: bool | None = None) -> dict[str, int]:
    """Create or update each tag limit, then verify it; returns what the server reports.

    `clear_stale` (default: when on the temporary local server) frees slots still held by killed runs.
    """
    verified: dict[str, int] = {}
    clear_stale = ephemeral_api() if clear_stale is None else clear_stale
    with get_client(sync_client=True) as client:
        for tag, slots in sorted(limits.items()):
            if clear_stale:
                _clear_stale_slots(client, tag)
            current, _, _ = _read(client, tag)
            if current != slots:
                if current is not None:
                    log.warning("concurrency limit %s: %s -> %s slots", tag, current, slots)
                    client.delete_concurrency_limit_by_tag(tag)
                client.create_concurrency_limit(tag=tag, concurrency_limit=slots)
            legacy, enforced, active = _read(client, tag)
            if legacy != slots or enforced != slots or not active:
                raise ConcurrencyLimitError(
                    f"concurrency limit {tag!r} reads back as {legacy}/{enforced} (active={active}), wanted {slots}"
                )
            verified[tag] = slots
    log.info("concurrency limits: %s", ", ".join(f"{k}={v}" for k, v in verified.items()))
    return verified
