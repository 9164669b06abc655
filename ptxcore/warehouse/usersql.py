"""Untrusted SQL over a warehouse file: one read-only statement, no access to anything but that file.

`ptxbench sql` runs whatever a user (or a script fed by a model's output) typed. Three layers, each enough
for what it covers:

1. DuckDB's own parser (`duckdb.extract_statements`) must find exactly one statement, of type SELECT
   (which includes `WITH ... SELECT`, `FROM ...`, `VALUES`, `DESCRIBE`, `SHOW`, `SUMMARIZE`) or EXPLAIN.
   ATTACH, COPY, SET/RESET, PRAGMA, INSTALL/LOAD, EXPORT, CALL, DDL and DML are refused before anything runs.
2. The file is opened read-only, so no statement can change it.
3. Before the user's text runs: `temp_directory = ''` (no spill files), `enable_external_access = false`
   (no file, extension, secret or network access: `read_text`, `glob`, `read_csv`, `COPY`, `ATTACH` all fail),
   then `lock_configuration = true` (nothing can undo the two).

And a time limit: every DuckDB call of the statement (execute, and each fetch of a streaming result) runs on a
worker thread while the calling thread waits; past `timeout_s` of DuckDB time in all, or on Ctrl-C in the calling
thread, the connection is interrupted (`DuckDBPyConnection.interrupt`) and QueryTimeoutError (one line) or
KeyboardInterrupt is raised. The waiting thread is the one that can take a signal: a statement run on the main
thread ignores Ctrl-C until it ends.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import duckdb

from .store import WarehouseError
from .views import current_views

ALLOWED_STATEMENTS = (duckdb.StatementType.SELECT, duckdb.StatementType.EXPLAIN)
"""Statement types a user query may have (DuckDB's parser's classification)."""

LOCKDOWN = (
    "SET temp_directory = ''",
    "SET enable_external_access = false",
    "SET lock_configuration = true",
)
"""Run in this order on the connection before the user's statement."""

FETCH_ROWS = 2048
"""Rows fetched from DuckDB at a time."""
DEFAULT_TIMEOUT_S = 60.0
"""Default time limit of one user statement (DuckDB time: executing and fetching, not writing the output)."""
_POLL_S = 0.2
T = TypeVar("T")


class UnsafeQueryError(WarehouseError):
    """A user query that is not exactly one read-only statement, or that tried to reach outside the file."""


class QueryTimeoutError(WarehouseError):
    """A user statement that ran past its time limit (interrupted)."""


class _Deadline:
    """Runs DuckDB calls on one worker thread against a budget of seconds; interrupts the connection when the
    budget is spent or the waiting thread is interrupted (Ctrl-C)."""

    def __init__(self, con: duckdb.DuckDBPyConnection, timeout_s: float) -> None:
        self.con, self.timeout_s, self.left = con, timeout_s, timeout_s
        self.pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="user-sql")

    def call(self, fn: Callable[[], T]) -> T:
        future = self.pool.submit(fn)
        started = time.monotonic()
        try:
            while True:
                try:
                    return future.result(timeout=max(0.0, min(_POLL_S, self.left - (time.monotonic() - started))))
                except FutureTimeout:
                    if time.monotonic() - started >= self.left:
                        self._stop(future)
                        raise QueryTimeoutError(f"the statement ran past its time limit of {self.timeout_s:g} s "
                                                "and was interrupted (--timeout-s)") from None
        except KeyboardInterrupt:
            self._stop(future)
            raise
        finally:
            self.left -= time.monotonic() - started

    def _stop(self, future: Future) -> None:
        self.con.interrupt()
        try:
            future.result(timeout=30)
        except BaseException:  # noqa: BLE001, S110 - the interrupted call's own error (INTERRUPT) is expected
            pass

    def close(self) -> None:
        self.pool.shutdown(wait=True)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def check_statement(query: str) -> duckdb.Statement:
    """The one read-only statement in `query` (DuckDB's parser decides), or UnsafeQueryError naming the problem."""
    try:
        statements = duckdb.extract_statements(query)
    except duckdb.Error as exc:
        raise UnsafeQueryError(_first_line(exc)) from exc
    if not statements:
        raise UnsafeQueryError("no SQL statement given")
    if len(statements) > 1:
        kinds = ", ".join(s.type.name for s in statements)
        raise UnsafeQueryError(f"exactly one statement is accepted, got {len(statements)} ({kinds})")
    kind = statements[0].type
    if kind not in ALLOWED_STATEMENTS:
        raise UnsafeQueryError(f"only read-only SELECT (or EXPLAIN) statements are accepted, got {kind.name}")
    return statements[0]


def _classify(exc: duckdb.Error) -> WarehouseError:
    text = _first_line(exc)
    if isinstance(exc, duckdb.PermissionException) or "disabled by configuration" in text:
        return UnsafeQueryError(f"refused: {text}")
    return WarehouseError(text)


@contextmanager
def locked_connection(path: str | Path) -> Iterator[duckdb.DuckDBPyConnection]:
    """A read-only connection to the warehouse file with external access off and the configuration locked."""
    path = Path(path)
    if not path.is_file():
        raise WarehouseError(f"no warehouse at {path}")
    try:
        con = duckdb.connect(str(path), read_only=True)
    except duckdb.Error as exc:
        raise WarehouseError(f"cannot open {path}: {_first_line(exc)}") from exc
    try:
        current_views(con)  # before the lockdown: TEMP views of this version's metric definitions
        for statement in LOCKDOWN:
            con.execute(statement)
        yield con
    finally:
        con.close()


class UserQuery:
    """The result of one checked user query: column names, then rows in chunks."""

    def __init__(self, cursor: duckdb.DuckDBPyConnection, deadline: _Deadline) -> None:
        self._cursor, self._deadline = cursor, deadline
        self.columns: list[str] = [d[0] for d in cursor.description or []]
        self.types: list[str] = [str(d[1]) for d in cursor.description or []]

    def rows(self) -> Iterator[tuple[Any, ...]]:
        """Every row, fetched FETCH_ROWS at a time (a large result is never held whole), within the time limit."""
        while True:
            try:
                chunk = self._deadline.call(lambda: self._cursor.fetchmany(FETCH_ROWS))
            except duckdb.Error as exc:
                raise _classify(exc) from exc
            if not chunk:
                return
            yield from chunk


@contextmanager
def run_user_query(path: str | Path, query: str, timeout_s: float = DEFAULT_TIMEOUT_S) -> Iterator[UserQuery]:
    """Check `query`, then run it on a locked read-only connection to `path` within `timeout_s` seconds of DuckDB
    time; yields the result."""
    if not timeout_s > 0:
        raise WarehouseError(f"--timeout-s {timeout_s!r}: the time limit must be a positive number of seconds")
    statement = check_statement(query)
    with locked_connection(path) as con:
        deadline = _Deadline(con, timeout_s)
        try:
            try:
                cursor = deadline.call(lambda: con.execute(statement))
            except duckdb.Error as exc:
                raise _classify(exc) from exc
            yield UserQuery(cursor, deadline)
        finally:
            deadline.close()
