"""Prefect UI artifacts of a campaign: a progress bar, a progress table and the headline table."""

from __future__ import annotations

import re
from collections import Counter
from uuid import UUID

from prefect.artifacts import (
    create_markdown_artifact,
    create_progress_artifact,
    create_table_artifact,
    update_progress_artifact,
)

from ptxcore.agent import CampaignSummary, HeadlineRow, TrajectoryPlan
from ptxcore.agent.summary import HEADER, headline_cells
from ptxcore.schema import TrajectoryRecord


def artifact_key(campaign_id: str, what: str) -> str:
    """Prefect keys allow lowercase letters, digits and dashes only."""
    slug = re.sub(r"[^a-z0-9-]+", "-", campaign_id.lower()).strip("-")
    return f"{slug}-{what}"


class ProgressArtifact:
    """The campaign's progress bar: finished trajectories count their whole budget, others their turns."""

    def __init__(self, campaign_id: str, plans: list[TrajectoryPlan]) -> None:
        self.planned = sum(p.agent.max_turns for p in plans) or 1
        self.id: UUID = create_progress_artifact(
            0.0, key=artifact_key(campaign_id, "progress"), description=f"Campaign {campaign_id}: turns"
        )
        self.last = -1.0

    def update(self, units_done: int) -> float:
        pct = round(min(100.0, 100.0 * units_done / self.planned), 1)
        if pct != self.last:
            update_progress_artifact(self.id, pct)
            self.last = pct
        return pct


def progress_markdown(campaign_id: str, plans: list[TrajectoryPlan], records: dict[str, TrajectoryRecord]) -> str:
    stops = Counter(r.stop_reason.value for r in records.values())
    turns = sum(r.num_turns for r in records.values())
    lines = [f"# Campaign `{campaign_id}`", "",
             f"{len(plans)} trajectories planned; {turns} turns recorded.", "",
             "| stop reason | trajectories |", "|---|---|"]
    lines += [f"| {k} | {v} |" for k, v in sorted(stops.items())]
    return "\n".join(lines)


def publish_progress(campaign_id: str, plans: list[TrajectoryPlan], records: dict[str, TrajectoryRecord]) -> None:
    create_markdown_artifact(progress_markdown(campaign_id, plans, records),
                             key=artifact_key(campaign_id, "status"), description="Campaign progress")


def publish_headline(summary: CampaignSummary, rows: list[HeadlineRow]) -> None:
    table = [dict(zip(HEADER, headline_cells(r), strict=True)) for r in rows]
    create_table_artifact(table, key=artifact_key(summary.campaign_id, "headline-table"),
                          description=f"Campaign {summary.campaign_id}: headline table")
    notes = [f"- warehouse: `{summary.warehouse}`",
             f"- MLflow: `{summary.mlflow_tracking_uri}` experiment `{summary.mlflow_experiment}`",
             f"- judges: {', '.join(f'{a}={b}' for a, b in summary.judges.items())}",
             f"- turns recorded: {summary.turns_recorded} ({summary.turns_this_run} in this run)"]
    if summary.errors:
        notes.append(f"- trajectories with errors: {len(summary.errors)} (rerun the campaign to resume them)")
    create_markdown_artifact(
        f"# Campaign `{summary.campaign_id}`: headline\n\n{summary.headline_markdown}\n\n" + "\n".join(notes),
        key=artifact_key(summary.campaign_id, "headline"), description="Headline table",
    )
