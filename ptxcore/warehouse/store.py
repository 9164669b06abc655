"""The Warehouse: one DuckDB file, the source of truth for campaigns, trajectories and turns.

One writer at a time: DuckDB locks the file for a writing process (a second one gets
`WarehouseLockedError`), and inside a process every statement runs under one lock. Upserts are
idempotent: rows are replaced by key (turn key = campaign_id, trajectory_id, turn) in one transaction.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa

from ptxcore.schema import CampaignRecord, TrajectoryRecord, TurnRecord

from . import rows as R
from .adapt_ddl import ADAPT_KEYS
from .ddl import ADDED_COLUMNS, TABLES, TURN_KEY, WAREHOUSE_SCHEMA_VERSION
from .env_ddl import ENV_KEYS
from .invalidation import InvalidationAction, InvalidationSummary, InvalidationTarget, apply_events
from .views import create_views, current_views

log = logging.getLogger(__name__)

_ARROW_TYPES = {"VARCHAR": pa.string(), "INTEGER": pa.int32(), "BIGINT": pa.int64(), "DOUBLE": pa.float64(),
                "BOOLEAN": pa.bool_()}

_KEYS: dict[str, tuple[str, ...]] = {
    "campaigns": ("campaign_id",),
    "trajectories": ("campaign_id", "trajectory_id"),
    "turns": TURN_KEY, "evaluations": TURN_KEY, "target_evidence": TURN_KEY,
    "ptxbench_source_turns": TURN_KEY, "turn_augmentations": TURN_KEY,
    "repair_notes": ("collection_id", "pair_id"),
    "kernels": ("sha256",), "environments": ("sha256",),
    "reference_latencies": ("definition", "workload_uuid", "gpu", "driver"),
    "fi_definitions": ("name",), "fi_workloads": ("definition", "uuid"), "fi_solutions": ("name",),
    "fi_traces": ("trace_sha256",), "invalidations": ("event_id",),
    **ADAPT_KEYS,
    **ENV_KEYS,
}
"""Primary key of every table (what an upsert replaces by)."""


class WarehouseError(RuntimeError):
    """The warehouse file cannot be used (locked, read-only, corrupt)."""


class WarehouseLockedError(WarehouseError):
    """Another process holds the write lock on the file."""


class Warehouse:
    """One DuckDB warehouse file. Use as a context manager or call close()."""

    def __init__(self, path: str | Path, read_only: bool = False) -> None:
        self.path = Path(path)
        self.read_only = read_only
        self._lock = threading.RLock()
        if read_only and not self.path.exists():
            raise WarehouseError(f"no warehouse at {self.path}")
        if not read_only:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            self._con = duckdb.connect(str(self.path), read_only=read_only)
        except duckdb.Error as exc:
            if isinstance(exc, duckdb.IOException) and "lock" in str(exc).lower():
                raise WarehouseLockedError(f"{self.path} is in use by another writer") from exc
            raise WarehouseError(f"cannot open {self.path}: {str(exc).splitlines()[0]}") from exc
        self._types: dict[str, pa.Schema] = {}
        if not read_only:
            self._create_schema()
        else:
            current_views(self._con)

    # -- lifecycle -------------------------------------------------------------------------------
    def __enter__(self) -> Warehouse:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        with self._lock:
            self._con.close()

    def _create_schema(self) -> None:
        with self._lock:
            for ddl in TABLES.values():
                self._con.execute(ddl)
            for table, column, typ in ADDED_COLUMNS:
                self._con.execute(f"ALTER TABLE {table} ADD COLUMN IF NOT EXISTS {column} {typ}")
            self._con.execute(
                "INSERT OR REPLACE INTO warehouse_meta VALUES ('schema_version', ?)", [str(WAREHOUSE_SCHEMA_VERSION)]
            )
            create_views(self._con)

    # -- generic helpers -------------------------------------------------------------------------
    def _schema(self, table: str) -> pa.Schema:
        if table not in self._types:
            cols = self._con.execute(f"DESCRIBE {table}").fetchall()
            self._types[table] = pa.schema([(name, _ARROW_TYPES[typ]) for name, typ, *_ in cols])
        return self._types[table]

    def _dicts(self, query: str, params: Sequence[Any] = ()) -> list[dict[str, Any]]:
        with self._lock:
            cur = self._con.execute(query, list(params))
            names = [d[0] for d in cur.description]
            return [dict(zip(names, r, strict=True)) for r in cur.fetchall()]

    def _replace(self, table: str, rows: list[dict[str, Any]], delete_keys: Iterable[tuple] = ()) -> None:
        """Delete rows with the batch's keys (and `delete_keys`), then insert the batch. Caller holds the lock."""
        key = _KEYS[table]
        keys = {tuple(r[c] for c in key) for r in rows} | set(delete_keys)
        if keys:
            key_table = pa.table({c: [k[i] for k in keys] for i, c in enumerate(key)},
                                 schema=pa.schema([self._schema(table).field(c) for c in key]))
            self._con.register("_keys", key_table)
            cond = " AND ".join(f'{table}."{c}" = _keys."{c}"' for c in key)
            self._con.execute(f"DELETE FROM {table} USING _keys WHERE {cond}")
            self._con.unregister("_keys")
        if rows:
            self._con.register("_batch", pa.Table.from_pylist(rows, schema=self._schema(table)))
            self._con.execute(f"INSERT INTO {table} BY NAME SELECT * FROM _batch")
            self._con.unregister("_batch")

    def _insert_missing(self, table: str, rows: list[dict[str, Any]]) -> None:
        """Insert rows whose key is not there yet (content-addressed tables). Caller holds the lock."""
        if not rows:
            return
        unique = {tuple(r[c] for c in _KEYS[table]): r for r in rows}
        self._con.register("_batch", pa.Table.from_pylist(list(unique.values()), schema=self._schema(table)))
        cond = " AND ".join(f'{table}."{c}" = _batch."{c}"' for c in _KEYS[table])
        self._con.execute(
            f"INSERT INTO {table} BY NAME SELECT * FROM _batch WHERE NOT EXISTS (SELECT 1 FROM {table} WHERE {cond})"
        )
        self._con.unregister("_batch")

    def _write(self, fn: Any, *args: Any) -> Any:
        """Run `fn(*args)` in one transaction under the lock."""
        if self.read_only:
            raise WarehouseError(f"{self.path} is open read-only")
        with self._lock:
            self._con.execute("BEGIN TRANSACTION")
            try:
                out = fn(*args)
            except BaseException:
                self._con.execute("ROLLBACK")
                raise
            self._con.execute("COMMIT")
            return out

    def upsert_rows(self, table: str, rows: list[dict[str, Any]]) -> int:
        """Replace rows of any table by its key (used by importers); returns rows written."""
        if table not in _KEYS:
            raise WarehouseError(f"unknown table {table}")
        unique = list({tuple(r[c] for c in _KEYS[table]): r for r in rows}.values())  # last one wins
        self._write(self._replace, table, unique)
        return len(unique)

    def _columns(self, table: str) -> list[str]:
        if table not in _KEYS:
            raise WarehouseError(f"unknown table {table}")
        with self._lock:
            return self._schema(table).names

    def replace_where(self, table: str, match: dict[str, Any], rows: list[dict[str, Any]]) -> int:
        """In one transaction: delete the rows of `table` whose columns equal `match`, insert `rows`."""
        if not match or any(c not in self._columns(table) for c in match):
            raise WarehouseError(f"cannot replace rows of {table} by {sorted(match)}")

        def job() -> None:
            cond = " AND ".join(f'"{c}" = ?' for c in match)
            self._con.execute(f"DELETE FROM {table} WHERE {cond}", list(match.values()))
            self._replace(table, list({tuple(r[c] for c in _KEYS[table]): r for r in rows}.values()))

        self._write(job)
        return len(rows)

    def replace_where_batches(self, table: str, match: dict[str, Any], batches: Iterable[list[dict[str, Any]]]) -> int:
        """`replace_where` for rows that arrive in batches (never all in memory): one transaction."""
        if not match or any(c not in self._columns(table) for c in match):
            raise WarehouseError(f"cannot replace rows of {table} by {sorted(match)}")

        def job() -> int:
            cond = " AND ".join(f'"{c}" = ?' for c in match)
            self._con.execute(f"DELETE FROM {table} WHERE {cond}", list(match.values()))
            written = 0
            for rows in batches:
                self._replace(table, list({tuple(r[c] for c in _KEYS[table]): r for r in rows}.values()))
                written += len(rows)
            return written

        return self._write(job)

    def insert_missing(self, table: str, rows: list[dict[str, Any]]) -> None:
        """Insert rows whose key is not there yet (content-addressed tables)."""
        self._columns(table)
        self._write(self._insert_missing, table, rows)

    def rows(self, table: str, match: dict[str, Any], order_by: Sequence[str] = ()) -> list[dict[str, Any]]:
        """Rows of `table` whose columns equal `match`, as dicts (column names are checked, values bound)."""
        columns = self._columns(table)
        if any(c not in columns for c in [*match, *order_by]):
            raise WarehouseError(f"cannot read {table} by {sorted([*match, *order_by])}")
        cond = " AND ".join(f'"{c}" = ?' for c in match) or "TRUE"
        order = " ORDER BY " + ", ".join(f'"{c}"' for c in order_by) if order_by else ""
        return self._dicts(f"SELECT * FROM {table} WHERE {cond}{order}", list(match.values()))

    # -- campaigns and trajectories --------------------------------------------------------------
    def upsert_campaign(self, rec: CampaignRecord) -> None:
        self._write(self._replace, "campaigns", [R.campaign_row(rec)])

    def upsert_campaigns(self, recs: Sequence[CampaignRecord]) -> int:
        rows = list({r.campaign_id: R.campaign_row(r) for r in recs}.values())
        self._write(self._replace, "campaigns", rows)
        return len(rows)

    def upsert_trajectory(self, rec: TrajectoryRecord) -> None:
        self.upsert_trajectories([rec])

    def upsert_trajectories(self, recs: Sequence[TrajectoryRecord]) -> int:
        rows = list({(r.campaign_id, r.trajectory_id): R.trajectory_row(r) for r in recs}.values())
        self._write(self._replace, "trajectories", rows)
        return len(rows)

    def campaigns(self) -> list[CampaignRecord]:
        return [R.campaign_from_row(r) for r in self._dicts("SELECT * FROM campaigns ORDER BY campaign_id")]

    def campaign(self, campaign_id: str) -> CampaignRecord | None:
        rows = self._dicts("SELECT * FROM campaigns WHERE campaign_id = ?", [campaign_id])
        return R.campaign_from_row(rows[0]) if rows else None

    def trajectories(self, campaign_id: str) -> list[TrajectoryRecord]:
        rows = self._dicts(
            "SELECT * FROM trajectories WHERE campaign_id = ? ORDER BY trajectory_id", [campaign_id]
        )
        return [R.trajectory_from_row(r) for r in rows]

    # -- turns -----------------------------------------------------------------------------------
    def upsert_turns(self, records: Sequence[TurnRecord]) -> int:
        """Write turn records (last one wins per key); returns the number of turn rows written."""
        unique = list({r.key: r for r in records}.values())
        if not unique:
            return 0
        self._write(self._write_turns, unique)
        log.debug("upserted %d turns", len(unique))
        return len(unique)

    def _write_turns(self, records: list[TurnRecord]) -> None:
        envs, kernels, turns, evals, evidence, augmented = [], [], [], [], [], []
        env_rows: dict[int, dict[str, Any]] = {}  # by object id: records often share one environment
        for rec in records:
            env = env_rows.get(id(rec.environment))
            if env is None:
                env = env_rows[id(rec.environment)] = R.environment_row(rec.environment)
                envs.append(env)
            turns.append(R.turn_row(rec, env["sha256"]))
            if rec.kernel_text is not None:
                kernels.append({"sha256": turns[-1]["kernel_key"], "text": rec.kernel_text,
                                "n_bytes": len(rec.kernel_text.encode())})
            if rec.judge is not None:
                jenv = R.environment_row(rec.judge.environment)
                envs.append(jenv)
                evals.append(R.evaluation_row(rec, rec.judge, jenv["sha256"]))
                evidence.append(R.evidence_row(rec, rec.judge))
            if rec.augmentation is not None:
                augmented.append(R.augmentation_row(rec, rec.augmentation))
        keys = [r.key for r in records]
        self._insert_missing("environments", envs)
        self._insert_missing("kernels", kernels)
        self._replace("turns", turns)
        self._replace("evaluations", evals, delete_keys=keys)
        self._replace("target_evidence", evidence, delete_keys=keys)
        self._replace("turn_augmentations", augmented, delete_keys=keys)

    def recorded_turn_keys(self, campaign_id: str) -> set[tuple[str, str, int]]:
        with self._lock:
            rows = self._con.execute(
                "SELECT campaign_id, trajectory_id, turn FROM turns WHERE campaign_id = ?", [campaign_id]
            ).fetchall()
        return {(c, t, int(n)) for c, t, n in rows}

    def turns(self, campaign_id: str, trajectory_id: str | None = None) -> list[TurnRecord]:
        """Turn records of a campaign (optionally one trajectory), ordered by trajectory and turn."""
        query = """
            SELECT t.*, k.text AS kernel_text, e.raw_json AS judge_json, env.raw_json AS environment_json,
                   {augmentation} AS augmentation_json
            FROM turns t
            LEFT JOIN kernels k ON k.sha256 = t.kernel_key
            LEFT JOIN evaluations e USING (campaign_id, trajectory_id, turn)
            {augmentation_join}
            LEFT JOIN environments env ON env.sha256 = t.environment_sha256
            WHERE t.campaign_id = ? {extra}
            ORDER BY t.trajectory_id, t.turn"""
        params: list[Any] = [campaign_id]
        extra = ""
        if trajectory_id is not None:
            extra, params = "AND t.trajectory_id = ?", [campaign_id, trajectory_id]
        aug = self.has_table("turn_augmentations")  # a read-only warehouse from before the table existed lacks it
        query = query.format(extra=extra, augmentation="a.raw_json" if aug else "NULL",
                             augmentation_join="LEFT JOIN turn_augmentations a USING (campaign_id, trajectory_id, turn)"
                             if aug else "")
        return [R.turn_from_row(r) for r in self._dicts(query, params)]

    def has_table(self, name: str) -> bool:
        """Whether the file holds the table (read-only files written by an older version may not)."""
        rows = self._dicts("SELECT count(*) AS n FROM information_schema.tables WHERE table_name = ?", [name])
        return bool(rows[0]["n"])

    def kernel_text(self, sha256: str) -> str | None:
        rows = self._dicts("SELECT text FROM kernels WHERE sha256 = ?", [sha256])
        return rows[0]["text"] if rows else None

    # -- post-hoc invalidation (invalidation.py) ------------------------------------------------------
    def invalidate(self, targets: Sequence[InvalidationTarget], reason: str, actor: str,
                   revoke: bool = False) -> InvalidationSummary:
        """Mark turns/kernels invalid (or revoke that), all or nothing; history is appended, never changed."""
        action = InvalidationAction.REVOKE if revoke else InvalidationAction.INVALIDATE
        return self._write(lambda: apply_events(self._con, list(targets), action, reason, actor, str(self.path)))

    def invalid_turns(self, campaign_id: str | None = None) -> dict[tuple[str, str, int], str]:
        """Turns currently invalidated -> reason (none for a file written before invalidation existed)."""
        query = "SELECT campaign_id, trajectory_id, turn, reason FROM v_invalid_turns"
        params = [] if campaign_id is None else [campaign_id]
        with self._lock:
            try:
                rows = self._con.execute(query + (" WHERE campaign_id = ?" if params else "") + " ORDER BY event_at",
                                         params).fetchall()
            except duckdb.CatalogException:
                return {}
        return {(c, t, int(n)): reason for c, t, n, reason in rows}

    def invalidation_events(self) -> list[dict[str, Any]]:
        """The whole invalidation log, oldest first."""
        try:
            return self._dicts("SELECT * FROM invalidations ORDER BY seq")
        except duckdb.CatalogException:
            return []

    # -- reference latencies ---------------------------------------------------------------------
    def upsert_reference_latency(
        self, definition: str, workload_uuid: str, gpu: str, driver: str, latency_ms: float, measured_at: str
    ) -> None:
        row = {"definition": definition, "workload_uuid": workload_uuid, "gpu": gpu, "driver": driver,
               "latency_ms": float(latency_ms), "measured_at": measured_at}
        self._write(self._replace, "reference_latencies", [row])

    def reference_latency(self, definition: str, workload_uuid: str, gpu: str, driver: str) -> float | None:
        """Cached reference latency in ms for (definition, workload, GPU model, driver), or None."""
        rows = self._dicts(
            "SELECT latency_ms FROM reference_latencies WHERE definition = ? AND workload_uuid = ? "
            "AND gpu = ? AND driver = ?", [definition, workload_uuid, gpu, driver],
        )
        return rows[0]["latency_ms"] if rows else None

    # -- SQL and export --------------------------------------------------------------------------
    def sql(self, query: str, params: Sequence[Any] = ()) -> tuple[list[str], list[tuple]]:
        """Run one SQL statement; returns (column names, rows). Raises WarehouseError on bad SQL."""
        with self._lock:
            try:
                cur = self._con.execute(query, list(params))
            except duckdb.Error as exc:
                raise WarehouseError(str(exc).strip().splitlines()[0]) from exc
            if cur.description is None:
                return [], []
            return [d[0] for d in cur.description], cur.fetchall()

    def table_names(self) -> list[str]:
        return [n for n in TABLES if n != "warehouse_meta"]

    def export_parquet(self, out_dir: Path) -> list[Path]:
        """Write every table to `<out_dir>/<table>.parquet`; returns the paths."""
        out_dir = Path(out_dir)
        out_dir.mkdir(parents=True, exist_ok=True)
        paths = []
        with self._lock:
            for table in self.table_names():
                path = out_dir / f"{table}.parquet"
                escaped = str(path).replace("'", "''")
                self._con.execute(f"COPY {table} TO '{escaped}' (FORMAT PARQUET)")
                paths.append(path)
        return paths
