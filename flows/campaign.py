"""The campaign flow: fan out model x arch x variant x trajectory x problem, each trajectory a subflow.

Rerunning a campaign id resumes it: recorded turns are never repeated (each trajectory continues after
its last recorded turn), finished trajectories are skipped, and MLflow is reconciled from the warehouse.
"""

from __future__ import annotations

import contextvars
import logging
import os
import subprocess
import threading
import uuid
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from pathlib import Path

from prefect import flow, tags
from prefect.runtime import flow_run
from prefect.utilities.annotations import quote

from ptxcore.adapt.retrieval import NoteRecord
from ptxcore.agent import (
    CampaignConfig,
    CampaignConfigError,
    CampaignSummary,
    PriorTurn,
    TrajectoryPlan,
    apply_overrides,
    headline_markdown,
    headline_rows,
    load_campaign,
    plan_campaign,
    stop_rule,
)
from ptxcore.agent.preflight import address_problems
from ptxcore.agent.records import now_iso
from ptxcore.agent.yamlfile import locate
from ptxcore.judge import JudgeBackend, NoGpuJudge, select_judge
from ptxcore.judge.backends.recorded import RecordedJudge
from ptxcore.judge.route import parse_file_routes, resolve_routes
from ptxcore.schema import CampaignRecord, StopReason, TrajectoryRecord, TurnRecord, text_sha256
from tasks.remote_judge import SERVED

from .artifacts import (
    ProgressArtifact,
    StatusArtifact,
    campaign_state,
    campaign_tags,
    name_this_run_a_resume,
    progress_line,
    publish_headline,
    tag_this_flow_run,
    trajectory_tags,
)
from .limits import ensure_limits, wanted_limits
from .logs import bridge_run_logs
from .preflight import NEW_ID_HINT, check_same_campaign, preflight_run, same_campaign_problem
from .replay import make_clients, register_warehouse_replays
from .retrieval import campaign_augmenter, file_notes
from .runtime import CampaignRuntime, PromptBuilder, assembled_prompt, register_runtime, unregister_runtime
from .tracking import (
    MlflowTracker,
    artifact_root_for,
    default_tracking_uri,
    experiment_name,
    experiment_ui_path,
)
from .trajectory import BODY_STARTED, run_name, trajectory_flow
from .writer import RecordWriter

log = logging.getLogger(__name__)

ProgressListener = Callable[[int, int, str], None]
PROGRESS_LISTENERS: list[ProgressListener] = []
"""Called from the flow's thread with (units done, units planned, last event); the CLI draws a bar."""


def resolve_config(config_path: str, campaign_id: str | None = None, warehouse: str | None = None,
                   mlflow_tracking_uri: str | None = None, turns: int | None = None) -> tuple[CampaignConfig, str]:
    """The campaign file with command-line overrides applied (re-validated). The addresses the file itself names
    (profiling services, an MLflow server) must be allowed outside it (ptxcore.agent.endpoints)."""
    config, text = load_campaign(config_path)
    problems = address_problems(config, mlflow_from_file=not mlflow_tracking_uri)
    if problems:
        raise CampaignConfigError(f"{locate(config_path, text, problems[0].split(':', 1)[0])}: {problems[0]}")
    updates: dict[str, object] = {}
    if campaign_id:
        updates["campaign_id"] = campaign_id
    if warehouse:
        updates["warehouse"] = warehouse
    if mlflow_tracking_uri:
        updates["mlflow_tracking_uri"] = mlflow_tracking_uri
    if turns:
        updates["turns"] = turns
    recorded = config.recorded_verdicts
    if recorded and not Path(recorded).is_absolute():  # relative to the campaign file, like its other paths
        updates["recorded_verdicts"] = str((Path(config_path).parent / recorded).resolve())
    return apply_overrides(config, **updates), text


def warehouse_path(config: CampaignConfig) -> Path:
    return Path(config.warehouse or f"runs/{config.id}/warehouse.duckdb").resolve()


def tracking_uri(config: CampaignConfig) -> tuple[str, Path | None]:
    """(tracking URI, artifact root): default sqlite under ./mlruns, artifacts beside the database."""
    uri = config.mlflow_tracking_uri or os.environ.get("PTXBENCH_MLFLOW_URI") or default_tracking_uri()
    return uri, artifact_root_for(uri)


def _git_commit() -> str | None:
    """The source revision, None where this is not a git checkout or git is missing."""
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10,
                             cwd=Path(__file__).resolve().parent)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return (out.stdout.strip() or None) if out.returncode == 0 else None


def _open_campaign(config: CampaignConfig, text: str, wh, tracker: MlflowTracker):
    """On the writer thread: campaign record, parent MLflow run, and what earlier runs recorded."""
    from importlib.metadata import PackageNotFoundError, version

    earlier = wh.campaign(config.id)
    problem = same_campaign_problem(config.id, earlier, text)
    if problem:  # checked before the run too (preflight); here again, on the writer, against a concurrent start
        raise CampaignConfigError(problem)
    try:
        pkg_version: str | None = version("ptxbench")
    except PackageNotFoundError:
        pkg_version = None
    wh.upsert_campaign(CampaignRecord(
        campaign_id=config.id, name=config.name, config_yaml=text, config_sha256=text_sha256(text),
        created_at=earlier.created_at if earlier else now_iso(), ptxbench_version=pkg_version,
        git_commit=_git_commit(),
    ))
    tracker.start_campaign({"name": config.name, "models": ",".join(m.name for m in config.models),
                            "architectures": ",".join(config.architectures), "turns": str(config.turns),
                            "trajectories": str(config.trajectories), "target_speedup": str(config.target_speedup),
                            "context_policy": config.context_policy.value}, text)
    turns: dict[str, list[TurnRecord]] = {}
    for record in wh.turns(config.id):
        turns.setdefault(record.trajectory_id, []).append(record)
    return turns, {t.trajectory_id: t for t in wh.trajectories(config.id)}


def finished_reason(plan: TrajectoryPlan, turns: list[TurnRecord], record: TrajectoryRecord | None) -> StopReason | None:
    """Why a trajectory needs no further turn, judging from what is recorded (None: it needs more)."""
    reason = stop_rule([PriorTurn.from_record(t) for t in turns], plan.agent)
    if reason is None and record is not None and record.stop_reason is StopReason.CONTEXT_OVERFLOW \
            and record.num_turns == len(turns):
        reason = StopReason.CONTEXT_OVERFLOW
    return reason


def _flow_run_name() -> str:
    params = flow_run.parameters
    name = params.get("campaign_id")
    if not name:
        try:
            name = load_campaign(params.get("config_path", ""))[0].id
        except (OSError, ValueError):
            name = Path(str(params.get("config_path", ""))).stem
    return f"campaign {name}"


class _Progress:
    """Turns recorded per trajectory, as the writer reports them (read on the flow's thread)."""

    def __init__(self, plans: list[TrajectoryPlan], recorded: dict[str, list[TurnRecord]]) -> None:
        self.turns = {p.trajectory_id: len(recorded.get(p.trajectory_id, [])) for p in plans}
        self.budget = {p.trajectory_id: p.agent.max_turns for p in plans}
        self.finished: dict[str, TrajectoryRecord | None] = {}
        self.this_run = 0
        self.last = ""

    def on_turn(self, record: TurnRecord) -> None:
        self.turns[record.trajectory_id] = max(self.turns.get(record.trajectory_id, 0), record.turn + 1)
        self.this_run += 1
        self.last = f"{record.problem} #{record.trajectory_id.rsplit('/', 1)[-1]} turn {record.turn}: " \
                    f"{record.status.value}"

    def units(self) -> int:
        return sum(self.budget[t] if t in self.finished else min(n, self.budget[t]) for t, n in self.turns.items())

    def line(self) -> str:
        return progress_line(sum(self.turns.values()), sum(self.budget.values()), len(self.finished), len(self.budget))

    def records(self) -> dict[str, TrajectoryRecord]:
        return {k: r for k, r in self.finished.items() if r is not None}


def _notify(progress: _Progress, artifact: ProgressArtifact) -> None:
    units = progress.units()
    artifact.update(units, progress.line())
    for listener in list(PROGRESS_LISTENERS):
        listener(units, artifact.planned, progress.last)


def _one_trajectory(plan: TrajectoryPlan, key: str, creating: threading.Lock) -> TrajectoryRecord:
    """One trajectory subflow, on a pool thread in a copy of the campaign's context: a direct child of the
    campaign run (no wrapper task), tagged, named with the campaign id, its arguments quoted so that Prefect
    infers no dependency on other trajectories from shared values.

    Subflow runs are created one at a time (`creating` is held from the call until the subflow's body starts):
    Prefect numbers a flow's subflow runs with a counter in the parent run's context, which two threads could
    read at once, and two subflows with one number would be merged into one run."""
    released = False

    def release() -> None:
        nonlocal released
        if not released:
            released = True
            creating.release()

    creating.acquire()
    token = BODY_STARTED.set(release)
    try:
        with tags(*trajectory_tags(plan)):
            return trajectory_flow.with_options(flow_run_name=run_name(plan))(plan=quote(plan), runtime_key=quote(key))
    finally:
        BODY_STARTED.reset(token)
        release()


def _run_trajectories(todo: list[TrajectoryPlan], runtime: CampaignRuntime, key: str, progress: _Progress,
                      artifact: ProgressArtifact, status: StatusArtifact) -> list[str]:
    errors: list[str] = []
    if not todo:
        return errors
    creating = threading.Lock()
    with ThreadPoolExecutor(max_workers=runtime.config.concurrency.trajectories,
                            thread_name_prefix="trajectory") as pool:
        futures: dict[Future, TrajectoryPlan] = {
            pool.submit(contextvars.copy_context().run, _one_trajectory, p, key, creating): p for p in todo}
        pending = set(futures)
        while pending:
            done, pending = wait(pending, timeout=2, return_when=FIRST_COMPLETED)
            for future in done:
                plan = futures[future]
                try:
                    progress.finished[plan.trajectory_id] = future.result()
                except Exception as exc:  # noqa: BLE001 - one trajectory's failure does not stop the others
                    progress.finished[plan.trajectory_id] = None
                    errors.append(f"{plan.trajectory_id}: {type(exc).__name__}: {str(exc).splitlines()[0][:300]}")
                    log.error("trajectory %s failed: %s", plan.trajectory_id, exc)
            _notify(progress, artifact)
            if done:
                status.publish({**runtime.trajectories, **progress.records()}, sum(progress.turns.values()))
    return errors


def select_judges(config: CampaignConfig, cli_routes: dict[str, str] | None, plugin: str | None) -> dict[str, JudgeBackend]:
    """One judge backend per architecture (routes decided by ptxcore.judge.resolve_routes: plugin > command
    line > campaign file > auto); says so when turns will not be evaluated."""
    routes = resolve_routes(config.architectures, cli=parse_file_routes(cli_routes or {}),
                            campaign=parse_file_routes(config.profilers), plugin=plugin)
    judges = {a: select_judge(routes[a], a, recorded=config.recorded_verdicts, served=SERVED)
              for a in config.architectures}
    for arch, judge in judges.items():
        if isinstance(judge, NoGpuJudge):
            log.warning("%s: %s; compiled turns are recorded as NOT_EVALUATED", arch, judge.reason)
        elif isinstance(judge, RecordedJudge):
            log.warning("%s: no %s GPU here: kernels with a verdict recorded in %s get that verdict (marked "
                        "recorded, with its GPU and date); the others are NOT_EVALUATED", arch, arch, judge.root)
    return judges


def _pending(plans: list[TrajectoryPlan], runtime: CampaignRuntime, progress: _Progress) -> list[TrajectoryPlan]:
    """Plans that need more turns; finished ones get their final trajectory record (if it was lost)."""
    todo = []
    for plan in plans:
        recorded = runtime.recorded.get(plan.trajectory_id, [])
        earlier = runtime.trajectories.get(plan.trajectory_id)
        reason = finished_reason(plan, recorded, earlier)
        if reason is None:
            todo.append(plan)
            continue
        record = earlier
        if earlier is None or earlier.stop_reason is not reason:
            speedups = [t.speedup for t in recorded if t.speedup is not None]
            record = plan.record(
                num_turns=len(recorded), stop_reason=reason, best_speedup=max(speedups) if speedups else None,
                started_at=earlier.started_at if earlier else None, finished_at=now_iso())
            runtime.writer.record_trajectory(record)
        progress.finished[plan.trajectory_id] = record
    return todo


@flow(name="campaign", flow_run_name=_flow_run_name, log_prints=False)
def campaign_flow(config_path: str = "campaigns/demo.yaml", campaign_id: str | None = None,
                  warehouse: str | None = None, profilers: dict[str, str] | None = None,
                  mlflow_tracking_uri: str | None = None, judge_plugin: str | None = None,
                  turns: int | None = None) -> CampaignSummary:
    """Run (or resume) a campaign; returns its summary with the headline table.

    Overrides of the campaign file: campaign_id, warehouse, profilers (arch -> URL), mlflow_tracking_uri,
    turns (a smaller budget for a quick run; the same id with more turns later extends it).
    """
    bridge_run_logs()
    config, text = resolve_config(config_path, campaign_id, warehouse, mlflow_tracking_uri=mlflow_tracking_uri,
                                  turns=turns)
    tag_this_flow_run(campaign_tags(config.id, [m.name for m in config.models], config.architectures))
    for warning in preflight_run(config, warehouse_path(config), config_path, text).warnings:
        log.warning(warning)  # nothing is created before this passes
    notes = file_notes(config, config_path)  # a bad notes file is refused before anything is written
    if _recorded_before(config):
        try:
            name_this_run_a_resume(config.id)
        except Exception as exc:  # noqa: BLE001 - a name is no reason to stop a campaign
            log.warning("could not name this flow run as a resume of %s: %s", config.id, str(exc).splitlines()[0])
    summary, turns_all = run_campaign(config, text, plan_campaign(config), judge_plugin, profilers=profilers,
                                      notes=notes)
    return campaign_state(summary, turns_all)  # type: ignore[return-value]


def _recorded_before(config: CampaignConfig) -> bool:
    """Whether the warehouse already holds this campaign (this run resumes it); False when it cannot be read now."""
    from ptxcore.warehouse import Warehouse, WarehouseError

    path = warehouse_path(config)
    if not path.is_file():
        return False
    try:
        with Warehouse(path, read_only=True) as wh:
            return wh.campaign(config.id) is not None
    except WarehouseError:
        return False


def run_campaign(config: CampaignConfig, text: str, plans: list[TrajectoryPlan], judge_plugin: str | None = None,
                 prompt_builder: PromptBuilder | None = None, profilers: dict[str, str] | None = None,
                 notes: list[NoteRecord] | None = None, new_id: str = NEW_ID_HINT,
                 ) -> tuple[CampaignSummary, list[TurnRecord]]:
    """Run (or resume) the given trajectories of a campaign inside the calling flow: limits, writer, judges,
    fan-out; returns the summary and every turn of the campaign. `prompt_builder` overrides how a plan's
    messages are built (adapt's repair campaigns); `profilers` are the command line's judge routes; `notes`
    flows.retrieval's; `new_id` the option that names another id (in the refusal of a changed configuration)."""
    wh_path = warehouse_path(config)
    check_same_campaign(config, text, wh_path, new_id)  # before anything is created (adapt's repair campaigns too)
    ensure_limits(wanted_limits(config, plans))
    uri, artifact_root = tracking_uri(config)
    plan_by_id = {p.trajectory_id: p for p in plans}
    writer = RecordWriter(wh_path, lambda: MlflowTracker(uri, config.id, artifact_root, plans), plan_by_id).start()
    key = f"{config.id}:{uuid.uuid4().hex[:8]}"
    try:
        augmenter = campaign_augmenter(config, notes, writer)
        recorded, trajectories = writer.call(lambda wh, tr: _open_campaign(config, text, wh, tr))
        added = writer.reconcile_mlflow()
        if added:
            log.info("MLflow reconciled from the warehouse: %d turns added", added)
        judges = select_judges(config, profilers, judge_plugin)
        register_warehouse_replays(config, writer, wh_path)
        runtime = CampaignRuntime(config=config, writer=writer, clients=make_clients(config), judges=judges,
                                  recorded=recorded, trajectories=trajectories, augmenter=augmenter,
                                  prompt_builder=prompt_builder or assembled_prompt)
        register_runtime(key, runtime)
        progress = _Progress(plans, recorded)
        writer.listeners.append(progress.on_turn)
        todo = _pending(plans, runtime, progress)
        artifact, status = ProgressArtifact(config.id, plans), StatusArtifact(config.id, plans)
        _notify(progress, artifact)
        status.publish({**trajectories, **progress.records()}, sum(progress.turns.values()), force=True)
        log.info("campaign %s: %d trajectories planned, %d to run", config.id, len(plans), len(todo))
        errors = _run_trajectories(todo, runtime, key, progress, artifact, status)
        return _finish(config, plans, writer, wh_path, uri, judges, len(todo), progress.this_run, errors)
    finally:
        unregister_runtime(key)
        writer.close()


def _finish(config: CampaignConfig, plans: list[TrajectoryPlan], writer: RecordWriter, wh_path: Path, uri: str,
            judges: dict[str, JudgeBackend], trajectories_run: int, turns_this_run: int,
            errors: list[str]) -> tuple[CampaignSummary, list[TurnRecord]]:
    writer.reconcile_mlflow()
    turns, trajectories = writer.call(lambda wh, tr: (wh.turns(config.id), wh.trajectories(config.id)))
    invalid = writer.call(lambda wh, tr: wh.invalid_turns(config.id))  # `warehouse invalidate`: not in the headline
    rows = headline_rows([t for t in turns if t.key not in invalid], trajectories)
    markdown = headline_markdown(rows)
    summary = CampaignSummary(
        campaign_id=config.id, warehouse=str(wh_path), mlflow_tracking_uri=uri,
        mlflow_experiment=experiment_name(config.id),
        mlflow_ui_path=experiment_ui_path(writer.call(lambda wh, tr: tr.experiment_id)), trajectories_planned=len(plans),
        trajectories_run=trajectories_run, turns_planned_max=sum(p.agent.max_turns for p in plans),
        turns_recorded=len(turns), turns_this_run=turns_this_run, errors=errors,
        judges={a: j.name for a, j in judges.items()}, headline=rows, headline_markdown=markdown,
    )
    judged = sum(r.gpu_judged for r in rows)
    metrics = {"turns_recorded": len(turns), "trajectories_with_errors": len(errors), "gpu_judged_turns": judged,
               "not_evaluated_turns": sum(r.not_evaluated for r in rows)}
    if judged:  # correctness was measured: log it (a campaign no GPU judged logs no correctness at all)
        metrics |= {"correct_turns": sum(r.correct for r in rows),
                    "target_correct_turns": sum(r.target_correct for r in rows)}
    writer.call(lambda wh, tr: tr.finish_campaign(markdown, metrics, failed=bool(errors)))
    StatusArtifact(config.id, plans).publish({t.trajectory_id: t for t in trajectories}, len(turns), force=True)
    publish_headline(summary, rows)
    log.info("campaign %s done: %d turns recorded (%d this run), %d errors\n%s", config.id, len(turns),
             turns_this_run, len(errors), markdown)
    return summary, turns
