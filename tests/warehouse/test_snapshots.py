"""The versions of a trigger table a live batch reads its ``%%trows`` from: each version is read
from the table's log once for all the streams on it, and a table dropped and made again at the same
path is read anew, never served from what its predecessor's versions held."""

from __future__ import annotations

import shutil

import pyarrow as pa
from deltalake import write_deltalake

from airflow_stream_provider.warehouse import snapshots


def test_a_version_is_read_once_for_all_the_streams_on_a_table(tmp_path, monkeypatch):
    path = str(tmp_path / "t")
    write_deltalake(path, pa.table({"a": [1]}))
    write_deltalake(path, pa.table({"a": [2, 3]}), mode="append")
    reads = []
    read = snapshots._table_at
    monkeypatch.setattr(snapshots, "_table_at", lambda p, v: reads.append(v) or read(p, v))

    first = snapshots.snapshot(path, 1)
    assert all(snapshots.snapshot(path, 1) is first for _ in range(5))  # five more streams
    assert reads == [1]
    assert first.version == 1 and first.files.num_rows == 2  # the two files of the two commits
    assert sum(first.files["num_records"].to_pylist()) == 3

    older = snapshots.snapshot(path, 0)  # a stream behind the others
    assert older.version == 0 and older.files.num_rows == 1
    assert snapshots.snapshot(path, None).version == 1  # the latest: looked up each time
    assert reads == [1, 0, None]


def test_a_table_made_again_at_the_same_path_is_read_anew(tmp_path):
    path = str(tmp_path / "t")
    write_deltalake(path, pa.table({"a": [1]}))
    assert snapshots.snapshot(path, 0).arrow_schema.names == ["a"]

    shutil.rmtree(path)  # dropped, and made again with other columns: its version 0 is another
    write_deltalake(path, pa.table({"a": [1], "b": ["x"]}))
    again = snapshots.snapshot(path, 0)
    assert again.arrow_schema.names == ["a", "b"]
    assert again.schema.fieldNames() == ["a", "b"]
