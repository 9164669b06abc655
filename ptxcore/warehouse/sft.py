"""SFT Parquet for ptxcore.adapt (pyarrow lives here): a fixed schema, atomic and deterministic writes.

Schema: `id` string, `messages` list<struct<role, content, step_loss_mask int64>>, `metadata` struct of the
fields adapt declares (str/int/float/bool, all nullable). The same rows always give the same bytes (no
timestamps), and a file appears only complete (written beside, then renamed).
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


def write_text_atomic(path: Path | str, text: str) -> str:
    """Write a text file atomically; returns its sha256."""
    return _atomic(Path(path), lambda tmp: tmp.write_text(text))


def read_sft_parquet(path: Path | str) -> list[dict[str, Any]]:
    """The rows back as Python dicts."""
    return pq.read_table(path).to_pylist()
