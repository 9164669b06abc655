"""Environment runs recorded like campaigns: the campaign's single writer owns the warehouse and MLflow.

An environment run is a campaign (campaign id = `EnvSpec.run_id`) whose trajectories are episodes and whose turns
are steps: the same `campaigns`, `trajectories`, `turns`, `evaluations` and `target_evidence` rows a campaign
writes, plus `env_steps` (reward, spec hash, seed) and `env_reward_specs`, so `ptxbench report` and every metric
view read rollouts unchanged. MLflow gets the campaign's runs, tagged `ptxbench.source = environment`, with the
per-step `reward` and `discounted_reward` metrics beside the turn's own.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import yaml
from mlflow.entities import Metric

from ptxcore.agent.plan import TrajectoryPlan
from ptxcore.agent.records import now_iso
from ptxcore.agent.types import LLMClient
from ptxcore.gym import EnvBuilder, EnvSpec, EnvStepRecord, RecordSource, RewardSpec, RewardSpecRecord
from ptxcore.gym.rollout import EpisodeResult, rollout
from ptxcore.schema import CampaignRecord, TrajectoryRecord, TurnRecord, text_sha256
from ptxcore.warehouse import Warehouse

from .tracking import MlflowTracker, artifact_root_for, default_tracking_uri
from .writer import RecordWriter

log = logging.getLogger(__name__)

TAG_SOURCE = "ptxbench.source"
"""MLflow tag on an environment run's parent and episode runs: `environment`."""
TAG_REWARD_SPEC = "ptxbench.reward_spec_sha256"


class EnvRecorder:
    """ptxcore.gym's StepRecorder on a RecordWriter: every write is a job of the writer thread, the warehouse first
    (a step is committed before `step` returns), MLflow after it (a view, reconciled from the warehouse)."""

    def __init__(self, writer: RecordWriter) -> None:
        self.writer = writer
        self._specs: set[str] = set()

    def record_episode(self, plan: TrajectoryPlan, record: TrajectoryRecord, spec: RewardSpec) -> None:
        self.writer.plans[plan.trajectory_id] = plan
        new_spec = spec.sha256 not in self._specs
        self._specs.add(spec.sha256)

        def job(wh: Warehouse, tracker: MlflowTracker) -> None:
            if new_spec:
                wh.upsert_rows("env_reward_specs", [RewardSpecRecord.of(spec).model_dump(mode="json")])
            wh.upsert_trajectory(record)
            self.writer.mlflow_safely(lambda: _tag_episode(tracker, plan, record, spec))

        self.writer.call(job)

    def record_step(self, plan: TrajectoryPlan, turn: TurnRecord, step: EnvStepRecord) -> None:
        def job(wh: Warehouse, tracker: MlflowTracker) -> None:
            wh.upsert_turns([turn])
            wh.upsert_rows("env_steps", [step.model_dump(mode="json")])
            self.writer.mlflow_safely(lambda: _log_step(tracker, plan, turn, step))

        self.writer.call(job)


def _tag_episode(tracker: MlflowTracker, plan: TrajectoryPlan, record: TrajectoryRecord, spec: RewardSpec) -> None:
    run_id = tracker.trajectory_run(plan)
    tracker.client.set_tag(run_id, TAG_SOURCE, RecordSource.ENVIRONMENT.value)
    tracker.client.set_tag(run_id, TAG_REWARD_SPEC, spec.sha256)
    tracker.finish_trajectory(plan, record)


def _log_step(tracker: MlflowTracker, plan: TrajectoryPlan, turn: TurnRecord, step: EnvStepRecord) -> None:
    if not tracker.log_turn(plan, turn):
        return
    stamp = int(time.time() * 1000)
    metrics = [Metric("reward", step.reward, stamp, step.turn),
               Metric("discounted_reward", step.reward * step.gamma ** step.turn, stamp, step.turn)]
    tracker.client.log_batch(tracker.trajectory_run(plan), metrics=metrics, synchronous=True)


def run_text(specs: Sequence[EnvSpec], route: str, episodes: int) -> str:
    """The run's configuration as YAML (campaigns.config_yaml; its hash is the campaign's config_sha256)."""
    return yaml.safe_dump({"source": RecordSource.ENVIRONMENT.value, "route": route, "episodes_per_spec": episodes,
                           "specs": [s.model_dump(mode="json") for s in specs]}, sort_keys=False)


def open_env_run(run_id: str, warehouse: Path, tracking_uri: str | None, text: str) -> tuple[RecordWriter, int]:
    """The run's writer (campaign record and parent MLflow run written) and the number of its episodes recorded
    before (new episodes are numbered after them)."""
    uri = tracking_uri or default_tracking_uri()
    writer = RecordWriter(warehouse, lambda: MlflowTracker(uri, run_id, artifact_root_for(uri)), {}).start()

    def job(wh: Warehouse, tracker: MlflowTracker) -> int:
        earlier = wh.campaign(run_id)
        wh.upsert_campaign(CampaignRecord(campaign_id=run_id, name=f"environment {run_id}", config_yaml=text,
                                          config_sha256=text_sha256(text),
                                          created_at=earlier.created_at if earlier else now_iso()))
        parent = tracker.start_campaign({"source": RecordSource.ENVIRONMENT.value}, text)
        tracker.client.set_tag(parent, TAG_SOURCE, RecordSource.ENVIRONMENT.value)
        return len(wh.trajectories(run_id))

    try:
        return writer, writer.call(job)
    except BaseException:
        writer.close()
        raise


def play(specs: Sequence[EnvSpec], policy: LLMClient, *, route: str, recorded: str | None, warehouse: Path,
         tracking_uri: str | None = None, episodes: int = 1, concurrency: int = 1,
         on_episode: Callable[[EpisodeResult], None] | None = None) -> list[EpisodeResult]:
    """Play `episodes` episodes of every spec with `policy` (at most `concurrency` at a time), recorded under the
    first spec's run id; returns them in plan order."""
    run_id = specs[0].run_id
    writer, earlier = open_env_run(run_id, warehouse, tracking_uri, run_text(specs, route, episodes))
    try:
        builder = EnvBuilder(route, recorded, EnvRecorder(writer), first_episode=earlier)
        envs = [builder.make(spec) for spec in specs for _ in range(episodes)]

        def one(item: tuple[int, object]) -> EpisodeResult:
            seed, env = item
            result = rollout(env, policy, seed=seed)  # type: ignore[arg-type]
            if on_episode is not None:
                on_episode(result)
            return result

        with ThreadPoolExecutor(max_workers=max(1, concurrency), thread_name_prefix="ptxbench-env") as pool:
            results = list(pool.map(one, enumerate(envs)))
        writer.call(lambda wh, tr: tr.finish_campaign(_summary(results), {"episodes": float(len(results))}, False))
        return results
    finally:
        writer.close()


def _summary(results: Sequence[EpisodeResult]) -> str:
    lines = ["| episode | steps | return | discounted | stop |", "|---|---|---|---|---|"]
    lines += [f"| {r.trajectory_id} | {len(r.rewards)} | {r.total_reward:.3f} | {r.discounted_return:.3f} | "
              f"{r.stop_reason.value} |" for r in results]
    return "\n".join(lines)


def serve(route: str, recorded: str | None, run_id: str, warehouse: Path, tracking_uri: str | None,
          server_config, reward: RewardSpec, max_envs: int, max_in_flight: int,
          on_ready: Callable[[str, Path | None], None] | None = None) -> None:
    """The HTTP front over environments of run `run_id`, every step recorded like a campaign's turn; serves until
    interrupted."""
    from ptxcore.gym.http import EnvHub, EnvServer

    server_config.check()  # an unsafe bind is refused before anything is opened
    text = yaml.safe_dump({"source": RecordSource.ENVIRONMENT.value, "route": route, "served": True,
                           "reward": reward.model_dump(mode="json")}, sort_keys=False)
    writer, earlier = open_env_run(run_id, warehouse, tracking_uri, text)
    try:
        hub = EnvHub(EnvBuilder(route, recorded, EnvRecorder(writer), first_episode=earlier), run_id=run_id,
                     reward=reward, max_envs=max_envs, max_in_flight=max_in_flight)
        server = EnvServer(hub, server_config, log_level="info")
        if on_ready is not None:
            on_ready(server.url, server.token_file)
        server.run()
    finally:
        writer.close()
