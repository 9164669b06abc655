"""SFT Parquet for ptxcore.adapt (pyarrow lives here): fixed schemas, streamed, atomic and deterministic writes.

Two layouts. Messages: `id` string, `messages` list<struct<role, content, step_loss_mask int64>>, `metadata`
struct of the fields adapt declares (str/int/float/bool, all nullable). Prompt-completion (TRL's conversational
form): `id`, `prompt` list<struct<role, content>>, `completion` list<struct<role, content>>. Rows are written in
batches (`SftParquetWriter`: one row group per batch, never the whole file in memory). The same rows in the same
batches always give the same bytes (no timestamps), and a file appears only complete (written beside, renamed).
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

_TYPES = {str: pa.string(), int: pa.int64(), float: pa.float64(), bool: pa.bool_()}
MESSAGE = pa.struct([("role", pa.string()), ("content", pa.string()), ("step_loss_mask", pa.int64())])
CHAT = pa.struct([("role", pa.string()), ("content", pa.string())])
PROMPT_COMPLETION = pa.schema([("id", pa.string()), ("prompt", pa.list_(CHAT)), ("completion", pa.list_(CHAT))])
"""TRL's conversational prompt-completion layout."""


def sft_schema(metadata_fields: dict[str, type]) -> pa.Schema:
    """The Parquet schema for rows with this metadata layout."""
    meta = pa.struct([(name, _TYPES[typ]) for name, typ in metadata_fields.items()])
    return pa.schema([("id", pa.string()), ("messages", pa.list_(MESSAGE)), ("metadata", meta)])


def file_sha256(path: Path | str) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _atomic(path: Path, write: Any) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        write(tmp)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return file_sha256(path)


def write_sft_parquet(path: Path | str, rows: list[dict[str, Any]], metadata_fields: dict[str, type]) -> str:
    """Write rows ({id, messages, metadata}) atomically; returns the file's sha256."""
    table = pa.Table.from_pylist(rows, schema=sft_schema(metadata_fields))
    return _atomic(Path(path), lambda tmp: pq.write_table(table, tmp, compression="zstd"))


class SftParquetWriter:
    """A Parquet file written batch by batch beside its final name, renamed into place by `close()` (a failure
    leaves nothing at the final name). Use as a context manager."""

    def __init__(self, path: Path | str, schema: pa.Schema) -> None:
        self.path, self.schema = Path(path), schema
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
        self._writer: pq.ParquetWriter | None = pq.ParquetWriter(self._tmp, schema, compression="zstd")
        self.rows = 0

    def write(self, rows: list[dict[str, Any]]) -> None:
        """Append one batch (one row group)."""
        if rows and self._writer is not None:
            self._writer.write_table(pa.Table.from_pylist(rows, schema=self.schema))
            self.rows += len(rows)

    def close(self) -> str:
        """Finish the file; returns its sha256."""
        if self._writer is None:
            raise ValueError(f"{self.path}: already closed")
        self._writer.close()
        self._writer = None
        os.replace(self._tmp, self.path)
        return file_sha256(self.path)

    def abort(self) -> None:
        if self._writer is not None:
            self._writer.close()
            self._writer = None
        self._tmp.unlink(missing_ok=True)

    def __enter__(self) -> SftParquetWriter:
        return self

    def __exit__(self, kind: object, *rest: object) -> None:
        if kind is not None or self._writer is not None:
            self.abort()


def write_text_atomic(path: Path | str, text: str) -> str:
    """Write a text file atomically; returns its sha256."""
    return _atomic(Path(path), lambda tmp: tmp.write_text(text))


def read_sft_parquet(path: Path | str) -> list[dict[str, Any]]:
    """The rows back as Python dicts."""
    return pq.read_table(path).to_pylist()
