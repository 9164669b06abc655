"""What the Prefect UI shows of a campaign besides its runs: artifacts, run tags and outcome states.

Campaign flow run: a live progress bar ("n of at most N turns, m of T trajectories done"), a status table
republished while it runs, the headline table at the end, tags campaign:/model:/arch:, and a final state whose
message sums the verdicts. Trajectory flow runs: tags campaign:/model:/arch:/variant:/problem:, a table of
their turns, and a final state named by the best verdict.
"""

from __future__ import annotations

import re
import time
from collections import Counter
from collections.abc import Sequence
from typing import TYPE_CHECKING
from uuid import UUID

from prefect.artifacts import (
    create_markdown_artifact,
    create_progress_artifact,
    create_table_artifact,
    update_progress_artifact,
)
from prefect.states import State

from ptxcore.agent import CampaignSummary, HeadlineRow, TrajectoryPlan
from ptxcore.agent.summary import headline_columns, headline_markdown
from ptxcore.schema import EvaluationStatus, TrajectoryRecord, TurnRecord
from tasks.states import RECORDED_SUFFIX, outcome

if TYPE_CHECKING:
    from prefect.client.orchestration import SyncPrefectClient


def artifact_key(campaign_id: str, what: str) -> str:
    """Prefect keys allow lowercase letters, digits and dashes only."""
    slug = re.sub(r"[^a-z0-9-]+", "-", campaign_id.lower()).strip("-")
    return f"{slug}-{what}"


class ProgressArtifact:
    """The campaign's progress bar: finished trajectories count their whole budget, others their turns; its
    description says how many turns are recorded and how many trajectories are done."""

    def __init__(self, campaign_id: str, plans: list[TrajectoryPlan]) -> None:
        self.planned = sum(p.agent.max_turns for p in plans) or 1
        self.campaign_id = campaign_id
        self.id: UUID = create_progress_artifact(
            0.0, key=artifact_key(campaign_id, "progress"), description=f"Campaign {campaign_id}: starting"
        )
        self.last: tuple[float, str] = (-1.0, "")

    def update(self, units_done: int, description: str = "") -> float:
        pct = round(min(100.0, 100.0 * units_done / self.planned), 1)
        if (pct, description) != self.last:
            update_progress_artifact(self.id, pct, description=f"Campaign {self.campaign_id}: {description}"
                                     if description else None)
            self.last = (pct, description)
        return pct


def progress_line(turns: int, turns_max: int, done: int, trajectories: int) -> str:
    return f"{turns} of at most {turns_max} turns recorded, {done} of {trajectories} trajectories done"


def progress_markdown(campaign_id: str, plans: list[TrajectoryPlan], records: dict[str, TrajectoryRecord],
                      turns: int | None = None) -> str:
    """Trajectories by state; `records` holds the finished ones (and any other recorded so far)."""
    finished = {k: r for k, r in records.items() if r.finished_at}
    stops = Counter(r.stop_reason.value for r in finished.values())
    waiting = len(plans) - len(finished)
    turns = sum(r.num_turns for r in records.values()) if turns is None else turns
    lines = [f"# Campaign `{campaign_id}`", "",
             progress_line(turns, sum(p.agent.max_turns for p in plans), len(finished), len(plans)) + ".", "",
             "| state | trajectories |", "|---|---|"]
    lines += [f"| {k} | {v} |" for k, v in sorted(stops.items())]
    if waiting:
        lines.append(f"| running or waiting | {waiting} |")
    return "\n".join(lines)


class StatusArtifact:
    """The campaign's status table, republished (a new version of one keyed artifact) at most every `every_s`."""

    def __init__(self, campaign_id: str, plans: list[TrajectoryPlan], every_s: float = 10.0) -> None:
        self.campaign_id, self.plans, self.every_s = campaign_id, plans, every_s
        self.published_at = float("-inf")

    def publish(self, records: dict[str, TrajectoryRecord], turns: int | None = None, force: bool = False) -> bool:
        if not force and time.monotonic() - self.published_at < self.every_s:
            return False
        create_markdown_artifact(progress_markdown(self.campaign_id, self.plans, records, turns),
                                 key=artifact_key(self.campaign_id, "status"), description="Campaign progress")
        self.published_at = time.monotonic()
        return True


def publish_progress(campaign_id: str, plans: list[TrajectoryPlan], records: dict[str, TrajectoryRecord]) -> None:
    StatusArtifact(campaign_id, plans).publish(records, force=True)


def campaign_tags(campaign_id: str, models: Sequence[str], archs: Sequence[str]) -> list[str]:
    return [f"campaign:{campaign_id}", *(f"model:{m}" for m in models), *(f"arch:{a}" for a in archs)]


def trajectory_tags(plan: TrajectoryPlan) -> list[str]:
    return [f"campaign:{plan.campaign_id}", f"model:{plan.model.name}", f"arch:{plan.arch}",
            f"variant:{plan.prompt_variant}", f"problem:{plan.problem}"]


def tag_this_flow_run(tags: Sequence[str]) -> None:
    """Add tags to the running flow run (its own tags are fixed when it is created)."""
    from prefect.client.orchestration import get_client
    from prefect.runtime import flow_run

    if not flow_run.id:  # called outside a flow run (e.g. `.fn`)
        return
    current = list(flow_run.tags or [])
    with get_client(sync_client=True) as client:
        client.update_flow_run(flow_run.id, tags=current + [t for t in tags if t not in current])


def _campaign_runs(client: SyncPrefectClient, campaign_id: str) -> list:
    """Top-level `campaign` flow runs tagged with this campaign, oldest first."""
    from prefect.client.schemas.filters import (
        FlowFilter,
        FlowFilterName,
        FlowRunFilter,
        FlowRunFilterParentTaskRunId,
        FlowRunFilterTags,
    )
    from prefect.client.schemas.sorting import FlowRunSort

    return client.read_flow_runs(
        flow_filter=FlowFilter(name=FlowFilterName(any_=["campaign"])),
        flow_run_filter=FlowRunFilter(tags=FlowRunFilterTags(all_=[f"campaign:{campaign_id}"]),
                                      parent_task_run_id=FlowRunFilterParentTaskRunId(is_null_=True)),
        sort=FlowRunSort.EXPECTED_START_TIME_ASC, limit=200)  # the API's maximum


def resume_name(campaign_id: str, number: int | None) -> str:
    return f"campaign {campaign_id} · resume {number}" if number else f"campaign {campaign_id} · resume"


def name_this_run_a_resume(campaign_id: str) -> str | None:
    """A rerun of a recorded campaign: rename this flow run "campaign ID · resume N" and leave an artifact that links
    the campaign's first run (when this Prefect server has it). Returns the new name (None outside a flow run)."""
    from prefect.client.orchestration import get_client
    from prefect.runtime import flow_run

    if not flow_run.id:
        return None
    with get_client(sync_client=True) as client:
        earlier = [r for r in _campaign_runs(client, campaign_id) if str(r.id) != str(flow_run.id)]
        name = resume_name(campaign_id, len(earlier) or None)
        client.update_flow_run(flow_run.id, name=name)
    if earlier:
        first = earlier[0]
        origin = (f"Its first run is [{first.name}]({_ui_path(str(first.id))}) (flow run `{first.id}`, started "
                  f"{first.start_time or first.expected_start_time}); {len(earlier)} earlier run(s) in all.")
    else:
        origin = "Its earlier runs are not on this Prefect server (the warehouse holds what they recorded)."
    create_markdown_artifact(
        f"# Campaign `{campaign_id}`: {name}\n\nThis run resumes the campaign: turns recorded earlier are not repeated, "
        f"and a trajectory already finished starts no subflow run. {origin}",
        key=artifact_key(campaign_id, "resume"), description=f"{name}: which run it resumes")
    return name


def _ui_path(flow_run_id: str) -> str:
    """The flow run's page: absolute where PREFECT_UI_URL is known, else the UI's own path."""
    from prefect.settings import PREFECT_UI_URL

    base = (PREFECT_UI_URL.value() or "").rstrip("/")
    return f"{base}/runs/flow-run/{flow_run_id}"


def _fmt(x: float | None, spec: str) -> str:
    return "n/a" if x is None else format(x, spec)


def _work(r: TurnRecord) -> str:
    """The target-work verdict with the FLOPs share where measured, e.g. `carries (1.00)`."""
    work = r.judge.target_instruction.work if r.judge is not None else None
    share = f" ({work.flops_share:.3g})" if work is not None and work.flops_share is not None else ""
    return r.target_work.value + share


def turn_rows(records: Sequence[TurnRecord]) -> list[dict[str, str]]:
    """One row per turn: verdict, build, target instructions, error or speedup, tokens, first feedback line."""
    rows = []
    for r in sorted(records, key=lambda r: r.turn):
        err = r.judge.correctness if r.judge is not None else None
        rows.append({
            "turn": str(r.turn), "status": r.status.value + (RECORDED_SUFFIX if _recorded([r]) else ""), "compile": r.compile.status.value if r.compile else "n/a",
            "target instructions": r.target_instruction.value, "target work": _work(r),
            "speedup": _fmt(r.speedup, ".2f"),
            "max abs error": _fmt(err.max_absolute_error if err else None, ".3g"),
            "reasoning tokens": str(r.usage.reasoning_tokens), "completion tokens": str(r.usage.completion_tokens),
            "feedback": (r.feedback.strip().splitlines() or [""])[0][:160],
        })
    return rows


def publish_turn_table(plan: TrajectoryPlan, records: Sequence[TurnRecord]) -> None:
    """The trajectory's turns as a table artifact of its flow run (no key: it belongs to the run)."""
    if records:
        create_table_artifact(turn_rows(records), description=f"{plan.label}: turns")


def trajectory_state(final: TrajectoryRecord, records: Sequence[TurnRecord]) -> State:
    """Completed, named PASSED if any turn passed, else by the last turn's verdict (the stop reason when there
    was no turn); the message gives the stop reason, the verdicts in order and the best speedup."""
    statuses = [r.status for r in sorted(records, key=lambda r: r.turn)]
    if EvaluationStatus.PASSED in statuses:
        name = EvaluationStatus.PASSED.value
    else:
        name = statuses[-1].value if statuses else final.stop_reason.value.upper()
    best = f"; best speedup {final.best_speedup:.2f}x" if final.best_speedup is not None else ""
    seq = " → ".join(s.value for s in statuses) or "no turn"
    return outcome(name + (RECORDED_SUFFIX if _recorded(records) else ""),
                   f"{final.stop_reason.value} after {final.num_turns} turns: {seq}{best}{_recorded_note(records)}",
                   final)


def _recorded(records: Sequence[TurnRecord]) -> list[str]:
    return [r.judge.recorded.label for r in records if r.judge is not None and r.judge.recorded is not None]


def _recorded_note(records: Sequence[TurnRecord]) -> str:
    """"; N verdicts recorded on X" where verdicts were reused from recorded judgements, else ""."""
    labels = _recorded(records)
    return f"; {len(labels)} verdicts recorded on {'; '.join(sorted(set(labels)))}" if labels else ""


def campaign_state(summary: CampaignSummary, turns: Sequence[TurnRecord]) -> State:
    """Completed, named NOT_EVALUATED when no turn was GPU-judged, PARTIAL when trajectories failed."""
    counts = Counter(t.status.value for t in turns)
    judged = sum(r.gpu_judged for r in summary.headline)
    name = "PARTIAL" if summary.errors else "NOT_EVALUATED" if not judged and counts else "Completed"
    verdicts = ", ".join(f"{v} {k}" for k, v in counts.most_common())
    return outcome(name, f"{summary.turns_recorded} turns ({summary.turns_this_run} this run): {verdicts or 'none'}"
                   f"{_recorded_note(turns)}; {len(summary.errors)} trajectories with errors", summary)


def publish_headline(summary: CampaignSummary, rows: list[HeadlineRow]) -> None:
    """The headline as a table artifact and a Markdown artifact, both on their side (a row per measure, a column
    per model and architecture, n/d cells): eleven columns side by side showed 8 of 11 in a 1400 px window."""
    table = headline_columns(rows)
    create_table_artifact(table, key=artifact_key(summary.campaign_id, "headline-table"),
                          description=f"Campaign {summary.campaign_id}: headline table")
    notes = [f"- warehouse: `{summary.warehouse}`",
             f"- MLflow: `{summary.mlflow_tracking_uri}` experiment `{summary.mlflow_experiment}` "
             f"(runs at `<MLflow UI>/{summary.mlflow_ui_path}`)",
             f"- judges: {', '.join(f'{a}={b}' for a, b in summary.judges.items())}",
             f"- turns recorded: {summary.turns_recorded} ({summary.turns_this_run} in this run)"]
    if summary.errors:
        notes.append(f"- trajectories with errors: {len(summary.errors)} (rerun the campaign to resume them)")
    create_markdown_artifact(
        f"# Campaign `{summary.campaign_id}`: headline\n\n{headline_markdown(rows, on_its_side=True)}\n\n"
        + "\n".join(notes),
        key=artifact_key(summary.campaign_id, "headline"), description="Headline table",
    )
