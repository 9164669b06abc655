"""The SFT Parquet writer and the generic row helpers the adapt tables use (hostile names and values)."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from ptxcore.warehouse import Warehouse, WarehouseError
from ptxcore.warehouse.sft import file_sha256, read_sft_parquet, sft_schema, write_sft_parquet

FIELDS = {"source_turn": int, "speedup": float, "note": str}
ROW = {"id": "r1", "messages": [{"role": "system", "content": "s", "step_loss_mask": 0},
                                {"role": "assistant", "content": "a", "step_loss_mask": 1}],
       "metadata": {"source_turn": 2, "speedup": None, "note": "x"}}


def test_schema_round_trip_and_determinism(tmp_path):
    path = tmp_path / "d.parquet"
    sha = write_sft_parquet(path, [ROW], FIELDS)
    schema = pq.read_schema(path)
    assert schema.field("messages").type == pa.list_(pa.struct([("role", pa.string()), ("content", pa.string()),
                                                                 ("step_loss_mask", pa.int64())]))
    assert schema.field("metadata").type.field("source_turn").type == pa.int64()
    assert schema == sft_schema(FIELDS)
    assert read_sft_parquet(path) == [ROW]
    assert write_sft_parquet(path, [ROW], FIELDS) == sha == file_sha256(path)  # same rows, same bytes
    assert [p.name for p in tmp_path.iterdir()] == ["d.parquet"]  # no temporary left behind


def test_a_failed_write_leaves_nothing(tmp_path):
    bad = {**ROW, "metadata": {"source_turn": "not an int"}}
    with pytest.raises((pa.ArrowInvalid, pa.ArrowTypeError)):
        write_sft_parquet(tmp_path / "x.parquet", [bad], FIELDS)
    assert list(tmp_path.iterdir()) == []


def test_row_helpers_bind_values_and_reject_unknown_columns(tmp_path):
    with Warehouse(tmp_path / "w.duckdb") as wh:
        hostile = "b'; DROP TABLE turns; --"
        wh.replace_where("adapt_builds", {"build_id": hostile}, [{"build_id": hostile, "recipe_name": "r"}])
        assert wh.rows("adapt_builds", {"build_id": hostile})[0]["recipe_name"] == "r"
        assert "turns" in wh.table_names() and wh.sql("SELECT count(*) FROM turns")[1] == [(0,)]
        wh.replace_where("adapt_builds", {"build_id": hostile}, [])
        assert wh.rows("adapt_builds", {"build_id": hostile}) == []
        for bad in ({'build_id" = build_id OR "1': 1}, {"nope": 1}):
            with pytest.raises(WarehouseError):
                wh.rows("adapt_builds", bad)
            with pytest.raises(WarehouseError):
                wh.replace_where("adapt_builds", bad, [])
        with pytest.raises(WarehouseError):
            wh.rows("adapt_builds; DROP TABLE turns", {})
        wh.insert_missing("adapt_texts", [{"sha256": "a", "text": "one"}])
        wh.insert_missing("adapt_texts", [{"sha256": "a", "text": "two"}])
        assert wh.rows("adapt_texts", {"sha256": "a"})[0]["text"] == "one"


def test_rows_stream_in_batches_and_a_failed_write_leaves_nothing(tmp_path):
    """SftParquetWriter: one row group per batch (no whole file in memory), renamed into place only when complete."""
    import pyarrow.parquet as pq

    from ptxcore.warehouse.sft import PROMPT_COMPLETION, SftParquetWriter

    path = tmp_path / "pc.parquet"
    rows = [{"id": f"r{i}", "prompt": [{"role": "user", "content": f"task {i}"}],
             "completion": [{"role": "assistant", "content": f"answer {i}"}]} for i in range(5)]
    with SftParquetWriter(path, PROMPT_COMPLETION) as w:
        w.write(rows[:2])
        assert not path.exists()  # not before close()
        w.write(rows[2:])
        sha = w.close()
    assert pq.read_table(path).to_pylist() == rows and pq.ParquetFile(path).num_row_groups == 2
    with SftParquetWriter(path, PROMPT_COMPLETION) as again:
        again.write(rows[:2])
        again.write(rows[2:])
        assert again.close() == sha == file_sha256(path)  # same batches, same bytes
    broken = tmp_path / "broken.parquet"
    with pytest.raises(ValueError), SftParquetWriter(broken, PROMPT_COMPLETION) as w:
        w.write(rows[:1])
        raise ValueError("row building failed")
    assert list(tmp_path.glob("*broken*")) == []
