"""Durable task store: one sqlite file in the work directory.

A client polling a task id after a restart gets the result, or `lost` (the task was running when the
service stopped: its result is unknown and it is never re-run or re-scored), or finds it pending again
(it had not started, so running it now scores it exactly once).
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
import uuid
from pathlib import Path

from ptxcore.gpu.service.models import AttemptRecord, TaskKind, TaskState, TaskView
from ptxcore.schema import JudgeResult, Language

LOST_MESSAGE = "lost: the profiling service stopped while this task was running; its result is unknown; resubmit"

_DDL = """
CREATE TABLE IF NOT EXISTS tasks (
  seq INTEGER PRIMARY KEY AUTOINCREMENT,
  task_id TEXT UNIQUE NOT NULL,
  kind TEXT NOT NULL,
  state TEXT NOT NULL,
  definition TEXT NOT NULL,
  workload_uuid TEXT NOT NULL,
  arch TEXT NOT NULL,
  source_sha256 TEXT NOT NULL,
  client_tag TEXT NOT NULL,
  timeout_s REAL NOT NULL,
  gpu INTEGER,
  attempts_json TEXT NOT NULL DEFAULT '[]',
  created_at REAL NOT NULL,
  started_at REAL,
  finished_at REAL,
  queue_s REAL,
  service_s REAL,
  result_json TEXT,
  error TEXT NOT NULL DEFAULT '',
  language TEXT NOT NULL DEFAULT 'cuda'
);
CREATE INDEX IF NOT EXISTS tasks_state ON tasks(state);
"""

_COLUMNS = (
    "task_id, kind, state, definition, workload_uuid, arch, source_sha256, client_tag, timeout_s, gpu, "
    "attempts_json, created_at, started_at, finished_at, queue_s, service_s, result_json, error, language"
)
_ADDED_COLUMNS = {"language": "TEXT NOT NULL DEFAULT 'cuda'"}
"""Columns added after the first release: a store written before them gains them on open (tasks then: cuda)."""


class TaskStore:
    """Thread-safe; every state change is one committed transaction."""

    def __init__(self, path: Path) -> None:
        self._lock = threading.Lock()
        self._db = sqlite3.connect(str(path), check_same_thread=False, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.executescript(_DDL)
        have = {row[1] for row in self._db.execute("PRAGMA table_info(tasks)")}
        for name, decl in _ADDED_COLUMNS.items():
            if name not in have:
                self._db.execute(f"ALTER TABLE tasks ADD COLUMN {name} {decl}")

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def create(self, *, kind: TaskKind, definition: str, workload_uuid: str, arch: str,
               source_sha256: str, client_tag: str, timeout_s: float, language: Language = Language.CUDA) -> TaskView:
        task_id = uuid.uuid4().hex
        now = time.time()
        with self._lock:
            self._db.execute(
                "INSERT INTO tasks (task_id, kind, state, definition, workload_uuid, arch, source_sha256, "
                "client_tag, timeout_s, created_at, language) VALUES (?,?,?,?,?,?,?,?,?,?,?)",
                (task_id, kind.value, TaskState.PENDING.value, definition, workload_uuid, arch,
                 source_sha256, client_tag, timeout_s, now, Language(language).value),
            )
        return self.get(task_id)

    def get(self, task_id: str) -> TaskView | None:
        with self._lock:
            row = self._db.execute(f"SELECT {_COLUMNS} FROM tasks WHERE task_id=?", (task_id,)).fetchone()
        return None if row is None else _view(row)

    def states(self, task_ids: list[str]) -> dict[str, TaskState]:
        """States only (cheap: no results parsed); unknown ids are absent."""
        out: dict[str, TaskState] = {}
        with self._lock:
            for i in range(0, len(task_ids), 500):
                chunk = task_ids[i:i + 500]
                rows = self._db.execute(
                    f"SELECT task_id, state FROM tasks WHERE task_id IN ({','.join('?' * len(chunk))})", chunk)
                out.update({t: TaskState(s) for t, s in rows})
        return out

    def mark_running(self, task_id: str, gpu: int) -> bool:
        """pending -> running; False when the task is not pending (never run a task twice)."""
        with self._lock:
            cur = self._db.execute(
                "UPDATE tasks SET state=?, gpu=?, started_at=? WHERE task_id=? AND state=?",
                (TaskState.RUNNING.value, gpu, time.time(), task_id, TaskState.PENDING.value),
            )
            return cur.rowcount == 1

    def requeue(self, task_id: str, attempt: AttemptRecord) -> None:
        """running -> pending after an excluded attempt."""
        self._finish_attempt(task_id, attempt, TaskState.PENDING, None, "", terminal=False)

    def complete(self, task_id: str, attempt: AttemptRecord, result: JudgeResult) -> None:
        """running -> completed with the scored verdict."""
        self._finish_attempt(task_id, attempt, TaskState.COMPLETED, result, "", terminal=True)

    def fail(self, task_id: str, attempt: AttemptRecord | None, result: JudgeResult | None, error: str) -> None:
        """-> failed (infrastructure, attempts exhausted, or not runnable)."""
        self._finish_attempt(task_id, attempt, TaskState.FAILED, result, error, terminal=True)

    def lose(self, task_id: str, attempt: AttemptRecord | None, error: str = LOST_MESSAGE) -> None:
        """-> lost (the service stopped during the attempt; never re-run)."""
        self._finish_attempt(task_id, attempt, TaskState.LOST, None, error, terminal=True)

    def _finish_attempt(self, task_id: str, attempt: AttemptRecord | None, state: TaskState,
                        result: JudgeResult | None, error: str, *, terminal: bool) -> None:
        with self._lock:
            row = self._db.execute(
                "SELECT attempts_json, created_at FROM tasks WHERE task_id=?", (task_id,)).fetchone()
            if row is None:
                raise KeyError(task_id)
            attempts = json.loads(row[0])
            queue_s = service_s = None
            if attempt is not None:
                attempts.append(attempt.model_dump(mode="json"))
                if state is TaskState.COMPLETED:
                    queue_s, service_s = attempt.started_at - row[1], attempt.finished_at - attempt.started_at
            self._db.execute(
                "UPDATE tasks SET state=?, attempts_json=?, result_json=?, error=?, finished_at=?, "
                "queue_s=?, service_s=?, gpu=COALESCE(?, gpu) WHERE task_id=?",
                (state.value, json.dumps(attempts), result.model_dump_json() if result else None, error,
                 time.time() if terminal else None, queue_s, service_s,
                 attempt.gpu if attempt else None, task_id),
            )

    def recover(self) -> tuple[list[str], list[TaskView]]:
        """At start-up: running tasks become lost; returns (lost ids, pending tasks in submission order)."""
        with self._lock:
            lost = [r[0] for r in self._db.execute(
                "SELECT task_id FROM tasks WHERE state=?", (TaskState.RUNNING.value,))]
            self._db.execute(
                "UPDATE tasks SET state=?, error=?, finished_at=? WHERE state=?",
                (TaskState.LOST.value, LOST_MESSAGE, time.time(), TaskState.RUNNING.value),
            )
            rows = self._db.execute(
                f"SELECT {_COLUMNS} FROM tasks WHERE state=? ORDER BY seq", (TaskState.PENDING.value,)
            ).fetchall()
        return lost, [_view(r) for r in rows]

    def counts(self) -> dict[TaskState, int]:
        with self._lock:
            rows = self._db.execute("SELECT state, COUNT(*) FROM tasks GROUP BY state").fetchall()
        out = {s: 0 for s in TaskState}
        out.update({TaskState(s): n for s, n in rows})
        return out


def _view(row: tuple) -> TaskView:
    (task_id, kind, state, definition, workload_uuid, arch, sha, tag, timeout_s, gpu, attempts,
     created, started, finished, queue_s, service_s, result, error, language) = row
    return TaskView(
        task_id=task_id, kind=TaskKind(kind), state=TaskState(state), definition=definition,
        workload_uuid=workload_uuid, arch=arch, source_sha256=sha, language=Language(language), client_tag=tag,
        timeout_s=timeout_s, gpu=gpu,
        attempts=[AttemptRecord.model_validate(a) for a in json.loads(attempts)],
        created_at=created, started_at=started, finished_at=finished, queue_s=queue_s, service_s=service_s,
        result=JudgeResult.model_validate_json(result) if result else None, error=error,
    )

