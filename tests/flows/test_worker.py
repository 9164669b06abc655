"""Multi-host scale-out: a campaign routes its judgements to a Prefect task worker (`ptxbench worker`), here
a subprocess on the session's Prefect test server judging with the fake judge; the campaign process itself
has no judge, so every verdict it records came through the worker."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from flows.campaign import campaign_flow
from flows.cli.campaign import parse_profilers
from flows.cli.errors import UserError
from ptxcore.judge import JudgeRoute, RouteError, select_judge
from ptxcore.schema import EvaluationStatus
from ptxcore.warehouse import Warehouse
from tasks.remote_judge import SERVED, PrefectWorkerJudge, judge_on_blackwell, judge_on_hopper, worker_task
from tests.waiting import wait_for

from .conftest import write_config

CLI = "from flows.cli.main import app; app()"


def test_each_architecture_has_its_own_task_key():
    assert judge_on_hopper.task_key != judge_on_blackwell.task_key
    assert worker_task("sm_90a") is judge_on_hopper and worker_task("b200") is judge_on_blackwell
    with pytest.raises(ValueError, match="known: blackwell, hopper"):
        worker_task("volta")


def test_prefect_route_is_accepted_and_selects_the_worker_judge():
    assert parse_profilers(["hopper=prefect"]) == {"hopper": "prefect"}
    assert parse_profilers(["prefect"]) == {"*": "prefect"}
    with pytest.raises(UserError, match="--profiler: judge route 'prefekt': expected auto, local"):
        parse_profilers(["hopper=prefekt"])
    judge = select_judge(JudgeRoute.parse("prefect"), "hopper", served=SERVED)
    assert isinstance(judge, PrefectWorkerJudge) and judge.name == "prefect-worker:hopper"
    with pytest.raises(RouteError, match="not served in this process"):  # only where the caller passes it
        select_judge(JudgeRoute.parse("prefect"), "hopper")


@pytest.mark.parametrize("args,env,message", [
    (["worker", "--arch", "hopper"], {"PREFECT_API_URL": ""}, "error: PREFECT_API_URL is not set"),
    (["worker", "--arch", "volta"], {"PREFECT_API_URL": "http://127.0.0.1:9/api"}, "error: "),
    (["worker", "--arch", "hopper", "--profiler", "gpu:8765"], {"PREFECT_API_URL": "http://127.0.0.1:9/api"},
     "error: judge route 'gpu:8765': expected auto, local, none, prefect, an http(s) URL"),
    (["worker", "--arch", "hopper", "--profiler", "prefect"], {"PREFECT_API_URL": "http://127.0.0.1:9/api"},
     "error: judge route 'prefect': a worker cannot hand its judgements to other workers"),
    (["worker", "--arch", "hopper", "--judge-plugin", "nocolon"], {"PREFECT_API_URL": "http://127.0.0.1:9/api"},
     "error: judge plugin 'nocolon' must look like module:factory"),
])
def test_worker_cli_errors_are_one_line(args, env, message, repo_root):
    out = subprocess.run([sys.executable, "-c", CLI, *args], cwd=repo_root, env={**os.environ, **env},
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 2 and out.stderr.startswith(message) and len(out.stderr.strip().splitlines()) == 1, \
        out.stderr


@pytest.fixture
def hopper_worker(flow_env, repo_root, tmp_path):
    """`ptxbench worker --arch hopper` with the fake judge, sharing result storage with this process."""
    from prefect.settings import PREFECT_LOCAL_STORAGE_PATH

    infra = tmp_path / "infra-once"
    infra.write_text("x")  # the worker's first judgement is an infrastructure failure
    env = {**os.environ, "PREFECT_API_URL": flow_env["api"], "FAKE_JUDGE_SPEEDUP": "1.5",
           "FAKE_JUDGE_INFRA_FILE": str(infra), "PREFECT_LOCAL_STORAGE_PATH": str(PREFECT_LOCAL_STORAGE_PATH.value()),
           "PREFECT_LOGGING_LEVEL": "WARNING"}
    log = (tmp_path / "worker.log").open("w")
    proc = subprocess.Popen([sys.executable, "-c", CLI, "worker", "--arch", "hopper", "--judge-plugin",
                             "tests.flows.fakes:fake_judge", "--limit", "2"], cwd=repo_root, env=env,
                            stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    def serving() -> bool:
        assert proc.poll() is None, (tmp_path / "worker.log").read_text()
        return "serving judge-on-hopper" in (tmp_path / "worker.log").read_text()

    wait_for(serving, 120, "the worker to serve judge-on-hopper")
    # No wait for its subscription: a task run delayed before the worker subscribes waits in the server's
    # queue for its task key (prefect.server.task_queue.TaskQueue) and is delivered when it does.
    yield {"infra": infra, "log": tmp_path / "worker.log"}
    os.killpg(proc.pid, signal.SIGINT)
    try:
        proc.wait(30)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
    log.close()


def test_campaign_judges_through_the_worker_with_infra_retry(flow_env, hopper_worker, monkeypatch):
    monkeypatch.setenv("PTXBENCH_WORKER_TIMEOUT_S", "120")
    cfg = write_config(flow_env["tmp"] / "viaworker.yaml", "viaworker", slots=2, turns=2,
                       problems="[mha_with_lse_d128]")
    summary = campaign_flow(config_path=str(cfg), warehouse=str(flow_env["tmp"] / "wh.duckdb"),
                            mlflow_tracking_uri=flow_env["mlflow_uri"], profilers={"hopper": "prefect"})
    log = Path(hopper_worker["log"]).read_text()
    assert summary.errors == [], (summary.errors, log[-3000:])
    assert summary.judges == {"hopper": "prefect-worker:hopper"}
    with Warehouse(summary.warehouse, read_only=True) as wh:
        turns = wh.turns("viaworker")
    judged = [t for t in turns if t.status is not EvaluationStatus.COMPILE_ERROR]
    assert turns and judged, [t.status for t in turns]
    # Only the worker has a judge: the fake GPU and the fake's 1.5x come from it.
    assert all(t.gpu == "Fake GPU (tests)" and t.status is EvaluationStatus.PASSED for t in judged)
    assert all(t.speedup == pytest.approx(1.5) for t in judged)
    assert not hopper_worker["infra"].exists(), "the worker's INFRA_ERROR happened and was retried"


def test_infra_failure_survives_pickling_between_worker_and_flow():
    import pickle

    from ptxcore.judge import InfraFailure
    from ptxcore.schema import JudgeResult, TargetInstruction, TargetInstructionEvidence

    exc = InfraFailure(JudgeResult(status=EvaluationStatus.INFRA_ERROR, reason="driver hiccup", definition="d",
                                   arch="hopper",
                                   target_instruction=TargetInstructionEvidence(status=TargetInstruction.UNKNOWN)))
    back = pickle.loads(pickle.dumps(exc))
    assert isinstance(back, InfraFailure) and back.result == exc.result and str(back) == str(exc)


class _Future:
    """A delayed judgement's future whose first waits raise as Prefect's does for a run with no state yet."""

    def __init__(self, stateless_reads: int, value: object) -> None:
        self.task_run_id = "run-1"
        self.stateless_reads = stateless_reads
        self.value = value
        self.calls = 0

    def result(self, timeout: float) -> object:
        self.calls += 1
        if self.calls <= self.stateless_reads:
            raise RuntimeError("Task run run-1 has no state which means it hasn't started yet.")
        return self.value


def _judge_with(monkeypatch, future: _Future, stateless: bool, timeout_s: float = 30.0):
    import tasks.remote_judge as remote_judge
    from ptxcore.arch import get_architecture
    from ptxcore.problems import get_problem

    judge = PrefectWorkerJudge("hopper", timeout_s=timeout_s)
    monkeypatch.setattr(judge, "task", type("T", (), {"delay": staticmethod(lambda *a, **k: future)})())
    monkeypatch.setattr(remote_judge, "_stateless", lambda run_id: stateless)
    monkeypatch.setattr(remote_judge, "STATELESS_POLL_S", 0.0)
    return judge.judge("src", get_problem("mha_with_lse_d128"), get_architecture("hopper"))


def test_a_task_run_read_before_its_first_state_is_waited_out(monkeypatch):
    future = _Future(stateless_reads=2, value="verdict")
    assert _judge_with(monkeypatch, future, stateless=True) == "verdict" and future.calls == 3


def test_a_runtime_error_of_a_run_that_has_a_state_is_raised(monkeypatch):
    future = _Future(stateless_reads=1, value="verdict")
    with pytest.raises(RuntimeError, match="has no state"):
        _judge_with(monkeypatch, future, stateless=False)
    assert future.calls == 1


def test_a_run_that_never_gets_a_state_fails_at_the_deadline(monkeypatch):
    future = _Future(stateless_reads=10**9, value="verdict")
    with pytest.raises(RuntimeError, match="has no state"):
        _judge_with(monkeypatch, future, stateless=True, timeout_s=0.05)
