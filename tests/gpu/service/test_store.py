"""The durable task store: lifecycle, never running a task twice, recovery after a crash."""

from __future__ import annotations

import time

import pytest

from ptxcore.gpu.service.models import AttemptDisposition, AttemptRecord, TaskKind, TaskState
from ptxcore.gpu.service.store import LOST_MESSAGE, TaskStore
from ptxcore.gpu.service.workdir import WorkDir, WorkDirError
from ptxcore.schema import EvaluationStatus

from .results import scripted_result


def create(store: TaskStore, tag: str = ""):
    return store.create(kind=TaskKind.EVALUATE, definition="gemm_n7168_k5120", workload_uuid="w", arch="hopper",
                        source_sha256="a" * 64, client_tag=tag, timeout_s=5)


def attempt(gpu=0, disposition=AttemptDisposition.SCORED, reason=""):
    now = time.time()
    return AttemptRecord(gpu=gpu, started_at=now, finished_at=now + 1, disposition=disposition, reason=reason)


def test_lifecycle_and_persistence(tmp_path):
    store = TaskStore(tmp_path / "t.sqlite3")
    view = create(store, "camp/traj/0")
    assert view.state is TaskState.PENDING and len(view.task_id) == 32
    assert store.mark_running(view.task_id, 1)
    assert not store.mark_running(view.task_id, 0), "a running task must not start again"
    store.requeue(view.task_id, attempt(1, AttemptDisposition.EXCLUDED, "GPU hot"))
    assert store.get(view.task_id).state is TaskState.PENDING
    assert store.mark_running(view.task_id, 0)
    item_result = scripted_result(_item(view), EvaluationStatus.INCORRECT_NUMERICAL, "wrong")
    store.complete(view.task_id, attempt(0), item_result)
    store.close()
    again = TaskStore(tmp_path / "t.sqlite3").get(view.task_id)
    assert again.state is TaskState.COMPLETED and again.gpu == 0 and again.client_tag == "camp/traj/0"
    assert [a.disposition for a in again.attempts] == [AttemptDisposition.EXCLUDED, AttemptDisposition.SCORED]
    assert again.result.status is EvaluationStatus.INCORRECT_NUMERICAL
    assert again.service_s == pytest.approx(1.0) and again.queue_s is not None


def test_recover_marks_running_lost_and_returns_pending_in_order(tmp_path):
    store = TaskStore(tmp_path / "t.sqlite3")
    a, b, c, d = (create(store, str(i)) for i in range(4))
    store.mark_running(a.task_id, 0)
    store.mark_running(d.task_id, 0)
    store.complete(d.task_id, attempt(), scripted_result(_item(d), EvaluationStatus.PASSED, ""))
    store.close()  # "crash": a is running, b and c pending, d done
    store = TaskStore(tmp_path / "t.sqlite3")
    lost, pending = store.recover()
    assert lost == [a.task_id]
    assert [v.task_id for v in pending] == [b.task_id, c.task_id]
    lost_view = store.get(a.task_id)
    assert lost_view.state is TaskState.LOST and lost_view.error == LOST_MESSAGE and lost_view.result is None
    assert store.get(d.task_id).state is TaskState.COMPLETED
    assert store.counts()[TaskState.PENDING] == 2


def test_unknown_task_is_none(tmp_path):
    assert TaskStore(tmp_path / "t.sqlite3").get("f" * 32) is None


def test_workdir_paths_come_from_hashes_only(tmp_path):
    wd = WorkDir(tmp_path / "wd")
    sha = wd.write_source("__global__ void k() {}\n")
    assert wd.source_path(sha).is_relative_to(wd.root) and wd.read_source(sha).startswith("__global__")
    for bad in ("../../etc/passwd", "a" * 63, "A" * 64, "../" + "a" * 61):
        with pytest.raises(WorkDirError):
            wd.source_path(bad)
    with pytest.raises(WorkDirError):
        wd.inside(tmp_path / "elsewhere")
    with pytest.raises(WorkDirError):
        wd.worker_dir(-1)


def _item(view):
    from ptxcore.gpu.service.models import WorkItem

    return WorkItem(task_id=view.task_id, kind=view.kind, definition=view.definition, arch=view.arch,
                    source="-", source_sha256=view.source_sha256, timeout_s=view.timeout_s)
