"""The judge tasks served by `ptxbench worker` must never come back `Cached`: Prefect's TaskWorker replaces a task's
NO_CACHE by DEFAULT (inputs + task source + flow run id), so two judgements of the same kernel text in one campaign
got the first verdict without judging (found by tests/hosts/test_two_hosts.py). Their policy keys each task run."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from uuid import uuid4

from prefect.cache_policies import INPUTS, NO_CACHE, RUN_ID
from prefect.settings import PREFECT_API_URL, temporary_settings
from prefect.task_worker import TaskWorker

from tasks.remote_judge import EACH_TASK_RUN, WORKER_TASKS


def _ctx(flow_run_id):
    return SimpleNamespace(task_run=SimpleNamespace(id=uuid4(), flow_run_id=flow_run_id))


def test_identical_judgements_in_one_flow_run_get_distinct_result_keys():
    flow_run = uuid4()
    inputs = {"source": "same kernel", "problem": "mha_with_lse_d128", "label": "mha/abc"}
    a, b = (EACH_TASK_RUN.compute_key(task_ctx=_ctx(flow_run), inputs=inputs, flow_parameters={}) for _ in "ab")
    assert a and b and a != b
    # The inputs and flow-run parts of the DEFAULT the worker would have used: one key for both, hence `Cached`.
    default_part = INPUTS + RUN_ID
    assert default_part.compute_key(task_ctx=_ctx(flow_run), inputs=inputs, flow_parameters={}) == \
        default_part.compute_key(task_ctx=_ctx(flow_run), inputs=inputs, flow_parameters={})


def test_the_task_worker_keeps_the_per_run_policy():
    async def served():
        return TaskWorker(*WORKER_TASKS.values()).tasks

    # An API URL that is never contacted: without one, the worker's client would start a temporary server.
    with temporary_settings({PREFECT_API_URL: "http://127.0.0.1:9/api"}):
        tasks = asyncio.run(served())

    assert len(tasks) == len(WORKER_TASKS)
    for task in tasks:
        assert task.cache_policy is EACH_TASK_RUN and task.cache_policy is not NO_CACHE
        assert task.persist_result is True  # results must reach the campaign host through result storage
