"""MLflow as a view of the warehouse: experiment per campaign, parent run per campaign, child run per trajectory.

Child runs carry `mlflow.parentRunId` explicitly (MLflow's active run does not cross Prefect's task
threads); per-turn metrics use step = turn and are written in one `log_batch` (atomic), whose `turn`
metric marks the step as logged, so re-logging after a crash or on resume never duplicates a step.
Only the campaign's writer thread calls this class.

What a person sees: the experiment is tagged as a model-development experiment (MLflow 3 UIs up to the
GenAI/model-training switch open such an experiment on its runs; with the switch, `experiment_ui_path` is the
link that does); child runs are named by what varies across the campaign (the
problem, in a one-model one-variant campaign) and tagged with everything; a turn nobody judged logs no
`correct` / `target_executed` (ptxcore.agent.records.step_metrics); feedback is plain text (`feedback.txt`,
line breaks kept) and the kernel is logged twice — `kernel.cu` to download, `kernel.cu.txt` for the artifact
viewer, which previews only known text extensions (`.cu` is not one).
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Iterable
from pathlib import Path

from mlflow import MlflowClient
from mlflow.entities import Metric, Param, RunStatus, RunTag
from mlflow.exceptions import MlflowException

from ptxcore.agent import TrajectoryPlan
from ptxcore.agent.records import step_metrics
from ptxcore.schema import StopReason, TrajectoryRecord, TurnRecord

log = logging.getLogger(__name__)

TAG_CAMPAIGN = "ptxbench.campaign_id"
TAG_KIND = "ptxbench.kind"
TAG_TRAJECTORY = "ptxbench.trajectory_id"
TAG_RECORDED = "ptxbench.recorded"
"""On a run (and as `ptxbench.recorded.turn_NN` per turn): where its reused verdicts were measured ("GPU, driver, date");
absent where every verdict was measured by the campaign's own judge."""
TAG_INVALID = "ptxbench.invalid_turns"
"""On a trajectory run: its turns invalidated in the warehouse after the fact, `turn: reason; ...`."""
MARKER_METRIC = "turn"
EXPERIMENT_KIND_TAG = "mlflow.experimentKind"
"""MLflow 3 picks an experiment's default page by this tag; without it a new experiment opens on GenAI traces."""
EXPERIMENT_KIND = "custom_model_development"
"""The kind whose default page is the runs table."""


def default_mlruns_dir() -> Path:
    """$PTXBENCH_MLRUNS, else ./mlruns (made absolute: MLflow's own default depends on the cwd)."""
    return Path(os.environ.get("PTXBENCH_MLRUNS") or "mlruns").resolve()


def default_tracking_uri(mlruns: Path | None = None) -> str:
    root = (mlruns or default_mlruns_dir()).resolve()
    root.mkdir(parents=True, exist_ok=True)
    return f"sqlite:///{root / 'mlflow.db'}"


def artifact_root_for(tracking_uri: str) -> Path | None:
    """Where a local store keeps its artifacts: beside a sqlite database (`<db folder>/artifacts`); None for a
    server (it decides). Without one MLflow would use ./mlruns of whatever the working directory is."""
    if tracking_uri.startswith("sqlite:///"):
        return Path(tracking_uri.removeprefix("sqlite:///")).parent / "artifacts"
    return None


def experiment_name(campaign_id: str) -> str:
    return f"ptxbench/{campaign_id}"


def experiment_ui_path(experiment_id: str) -> str:
    """The experiment's runs table in the MLflow UI, relative to the UI's address. MLflow 3.17's UI picks GenAI
    or model-training pages by a browser-wide switch (default GenAI), not by the experiment's kind tag; this
    query selects model training, whose default page is the runs."""
    return f"#/experiments/{experiment_id}?workflowType=machine_learning"


def short_run_names(plans: Iterable[TrajectoryPlan]) -> dict[str, str]:
    """trajectory id -> a run name of only what varies across the campaign, the most telling part first (problem,
    with the words that set it apart from its siblings leading; then variant, model, arch; then #index), so names
    differ within the first characters the runs table shows; the label where that would not be unique."""
    plans = list(plans)
    problems = lead_with_difference({p.problem for p in plans})
    dims = [lambda p: problems[p.problem], lambda p: p.prompt_variant, lambda p: p.model.name, lambda p: p.arch]
    varying = [d for d in dims if len({d(p) for p in plans}) > 1] or [dims[0]]
    indexed = len({p.index for p in plans}) > 1
    names = {p.trajectory_id: " · ".join(d(p) for d in varying) + (f" #{p.index}" if indexed else "") for p in plans}
    if len(set(names.values())) < len(names):
        return {p.trajectory_id: p.label for p in plans}
    return names


def lead_with_difference(names: Iterable[str]) -> dict[str, str]:
    """name -> the same words, those that set it apart from the names sharing its first word leading:
    {mha_with_lse_d128, mha_with_lse_d128_causal, mha_bwd_d128} -> "with_lse · mha_d128", "with_lse_causal ·
    mha_d128", "bwd · mha_d128"; a name alone in its family stays as it is."""
    words = {n: n.split("_") for n in names}
    families: dict[str, list[str]] = {}
    for n, w in words.items():
        families.setdefault(w[0], []).append(n)
    out = {}
    for members in families.values():
        common = set.intersection(*(set(words[n]) for n in members))
        for n in members:
            own = [w for w in words[n] if w not in common]
            out[n] = f"{'_'.join(own)} · {'_'.join(w for w in words[n] if w in common)}" if len(members) > 1 and own else n
    return out if len(set(out.values())) == len(out) else {n: n for n in words}


class MlflowTracker:
    """Writes one campaign's runs."""

    def __init__(self, tracking_uri: str, campaign_id: str, artifact_root: Path | None = None,
                 plans: Iterable[TrajectoryPlan] = ()) -> None:
        self.client = MlflowClient(tracking_uri=tracking_uri)
        self._names = short_run_names(plans)
        self.tracking_uri = tracking_uri
        self.campaign_id = campaign_id
        name = experiment_name(campaign_id)
        exp = self.client.get_experiment_by_name(name)
        if exp is None:
            location = None
            artifact_root = artifact_root or artifact_root_for(tracking_uri)
            if artifact_root is not None:
                location = (artifact_root.resolve() / campaign_id).as_uri()
            self.experiment_id = self.client.create_experiment(
                name, artifact_location=location, tags={TAG_CAMPAIGN: campaign_id, EXPERIMENT_KIND_TAG: EXPERIMENT_KIND})
        else:
            self.experiment_id = exp.experiment_id
            if EXPERIMENT_KIND_TAG not in exp.tags:  # experiments created before the tag existed
                self.client.set_experiment_tag(self.experiment_id, EXPERIMENT_KIND_TAG, EXPERIMENT_KIND)
        self.parent_run_id = ""
        self._runs: dict[str, str] = {}
        self._steps: dict[str, set[int]] = {}
        self._invalid_tags: dict[str, str] = {}
        self._recorded: dict[str, set[str]] = {}
        self._load_runs()

    def _load_runs(self) -> None:
        token = None
        while True:
            page = self.client.search_runs([self.experiment_id], max_results=1000, page_token=token)
            for run in page:
                tags = run.data.tags
                if tags.get(TAG_KIND) == "campaign":
                    self.parent_run_id = run.info.run_id
                elif TAG_TRAJECTORY in tags:
                    self._runs[tags[TAG_TRAJECTORY]] = run.info.run_id
                    if TAG_INVALID in tags:
                        self._invalid_tags[tags[TAG_TRAJECTORY]] = tags[TAG_INVALID]
                    if TAG_RECORDED in tags:
                        self._recorded[run.info.run_id] = set(tags[TAG_RECORDED].split("; "))
            token = page.token
            if not token:
                return

    def _params(self, run_id: str, params: dict[str, str]) -> None:
        try:
            self.client.log_batch(run_id, params=[Param(k, str(v)[:6000]) for k, v in params.items()])
        except MlflowException as exc:  # a resumed campaign whose file changed: keep the first values
            log.warning("MLflow params not updated for run %s: %s", run_id, str(exc).splitlines()[0])

    def start_campaign(self, params: dict[str, str], config_text: str) -> str:
        if not self.parent_run_id:
            run = self.client.create_run(self.experiment_id, run_name=f"campaign {self.campaign_id}",
                                         tags={TAG_CAMPAIGN: self.campaign_id, TAG_KIND: "campaign"})
            self.parent_run_id = run.info.run_id
        else:
            self.client.update_run(self.parent_run_id, status="RUNNING")
        self._params(self.parent_run_id, params)
        self.client.log_text(self.parent_run_id, config_text, "campaign.yaml")
        return self.parent_run_id

    def trajectory_run(self, plan: TrajectoryPlan) -> str:
        """The trajectory's child run (created once, found again on resume)."""
        if plan.trajectory_id in self._runs:
            return self._runs[plan.trajectory_id]
        tags = {TAG_CAMPAIGN: self.campaign_id, TAG_KIND: "trajectory", TAG_TRAJECTORY: plan.trajectory_id,
                "mlflow.parentRunId": self.parent_run_id, "model": plan.model.model, "arch": plan.arch,
                "prompt_variant": plan.prompt_variant, "problem": plan.problem, "index": str(plan.index),
                "label": plan.label}
        name = self._names.get(plan.trajectory_id, plan.label)
        run = self.client.create_run(self.experiment_id, run_name=name, tags=tags)
        self._runs[plan.trajectory_id] = run.info.run_id
        self._steps[run.info.run_id] = set()
        self._params(run.info.run_id, {
            "model": plan.model.model, "arch": plan.arch, "prompt_variant": plan.prompt_variant,
            "problem": plan.problem, "index": str(plan.index), "max_turns": str(plan.agent.max_turns),
            "target_speedup": str(plan.agent.target_speedup), "context_policy": plan.agent.context_policy.value,
            "language": plan.language.value, "decoding": json.dumps(plan.model.decoding, sort_keys=True),
        })
        return run.info.run_id

    def logged_steps(self, run_id: str) -> set[int]:
        if run_id not in self._steps:
            history = self.client.get_metric_history(run_id, MARKER_METRIC)
            self._steps[run_id] = {int(m.step) for m in history}
        return self._steps[run_id]

    def log_turn(self, plan: TrajectoryPlan, record: TurnRecord) -> bool:
        """Log one turn unless its step is already there; returns whether it logged."""
        run_id = self.trajectory_run(plan)
        if record.turn in self.logged_steps(run_id):
            return False
        prefix = f"turns/turn_{record.turn:02d}"
        if record.kernel_text is not None:
            self.client.log_text(run_id, record.kernel_text, f"{prefix}/kernel.cu")
            self.client.log_text(run_id, record.kernel_text, f"{prefix}/kernel.cu.txt")
        self.client.log_text(run_id, record.response_text, f"{prefix}/response.md")
        self.client.log_text(run_id, record.feedback, f"{prefix}/feedback.txt")
        stamp = int(time.time() * 1000)
        metrics = [Metric(k, v, stamp, record.turn) for k, v in step_metrics(record).items()]
        self.client.log_batch(run_id, metrics=metrics, tags=_recorded_tags(run_id, record, self._recorded),
                              synchronous=True)
        self._steps[run_id].add(record.turn)
        return True

    def recorded_sources(self) -> list[str]:
        """Every recorded-verdict source logged by this tracker (for the campaign run's tag)."""
        return sorted({label for labels in self._recorded.values() for label in labels})

    def mark_invalid_turns(self, invalid: dict[str, dict[int, str]]) -> int:
        """Tag each trajectory run with its invalidated turns (trajectory id -> turn -> reason); a tag whose
        invalidations were revoked is removed. Their steps stay (MLflow cannot delete one step). Returns changes."""
        changed = 0
        for trajectory_id, run_id in self._runs.items():
            turns = invalid.get(trajectory_id, {})
            value = "; ".join(f"{t}: {reason}" for t, reason in sorted(turns.items()))[:5000]
            if value == self._invalid_tags.get(trajectory_id, ""):
                continue
            if value:
                self.client.set_tag(run_id, TAG_INVALID, value)
            else:
                self.client.delete_tag(run_id, TAG_INVALID)
            self._invalid_tags[trajectory_id] = value
            changed += 1
        return changed

    def finish_trajectory(self, plan: TrajectoryPlan, record: TrajectoryRecord) -> None:
        run_id = self.trajectory_run(plan)
        self.client.set_tag(run_id, "stop_reason", record.stop_reason.value)
        self.client.set_tag(run_id, "num_turns", str(record.num_turns))
        if record.best_speedup is not None:
            self.client.log_metric(run_id, "best_speedup", record.best_speedup)
        if record.stop_reason is StopReason.RUNNING:
            return
        status = RunStatus.to_string(RunStatus.FAILED if record.stop_reason is StopReason.ERROR else RunStatus.FINISHED)
        self.client.set_terminated(run_id, status=status)

    def finish_campaign(self, headline_markdown: str, metrics: dict[str, float], failed: bool) -> None:
        self.client.log_text(self.parent_run_id, headline_markdown, "headline.md")
        if self.recorded_sources():
            self.client.set_tag(self.parent_run_id, TAG_RECORDED, "; ".join(self.recorded_sources()))
        stamp = int(time.time() * 1000)
        self.client.log_batch(self.parent_run_id, metrics=[Metric(k, float(v), stamp, 0) for k, v in metrics.items()])
        self.client.set_terminated(self.parent_run_id,
                                   status=RunStatus.to_string(RunStatus.FAILED if failed else RunStatus.FINISHED))


def _recorded_tags(run_id: str, record: TurnRecord, seen: dict[str, set[str]]) -> list[RunTag]:
    """Tags that say a turn's verdict was reused: `ptxbench.recorded.turn_NN` and the run's `ptxbench.recorded`."""
    rec = record.judge.recorded if record.judge is not None else None
    if rec is None:
        return []
    labels = seen.setdefault(run_id, set())
    labels.add(rec.label)
    return [RunTag(f"{TAG_RECORDED}.turn_{record.turn:02d}", rec.label), RunTag(TAG_RECORDED, "; ".join(sorted(labels)))]
