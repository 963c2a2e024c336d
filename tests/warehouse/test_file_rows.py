"""The rows of a table's data files, read once while kept: the streams on one table read the same
recent files for their windows (:func:`~airflow_stream_provider.warehouse.snapshots.file_rows`)."""

from __future__ import annotations

import collections

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from airflow_stream_provider.warehouse import snapshots

SCHEMA = pa.schema([("ts", pa.timestamp("us", tz="UTC")), ("v", pa.int32())])


@pytest.fixture
def files(tmp_path, monkeypatch):
    monkeypatch.setattr(snapshots, "_files", collections.OrderedDict())
    monkeypatch.setattr(snapshots, "_files_bytes", 0)
    names = []
    for i in range(10):
        name = str(tmp_path / f"part-{i}.parquet")
        pq.write_table(pa.table({"ts": pa.array([i * 10, i * 10 + 1], pa.int64()).cast(SCHEMA.field("ts").type),
                                 "v": pa.array([i, -i], pa.int32())}), name)
        names.append(name)
    return names


def _reads(monkeypatch) -> list[list[str]]:
    """The files each dataset made from here on reads."""
    made = []
    dataset = snapshots.pds.dataset

    def counted(paths, **kwargs):
        made.append(list(paths))
        return dataset(paths, **kwargs)

    monkeypatch.setattr(snapshots.pds, "dataset", counted)
    return made


def test_files_are_read_once_and_given_in_order(files, monkeypatch):
    reads = _reads(monkeypatch)
    first = snapshots.file_rows(files[:2], SCHEMA)
    assert first["v"].to_pylist() == [0, 0, 1, -1]
    again = snapshots.file_rows([files[2], files[0], files[1]], SCHEMA)
    assert again["v"].to_pylist() == [2, -2, 0, 0, 1, -1]
    assert reads == [[files[0]], [files[1]], [files[2]]]  # each file once
    assert again.schema == SCHEMA
    assert snapshots.file_rows([], SCHEMA).num_rows == 0


def test_a_column_added_since_a_file_was_written_is_null_in_its_rows(files):
    snapshots.file_rows(files[:1], SCHEMA)  # kept as the table's schema typed it then
    wider = SCHEMA.append(pa.field("note", pa.string()))
    rows = snapshots.file_rows(files[:1], wider)
    assert rows.schema == wider
    assert rows["note"].to_pylist() == [None, None]
    assert snapshots.file_rows(files[:1], SCHEMA).schema == SCHEMA


def test_files_beyond_the_bytes_kept_are_read_again(files, monkeypatch):
    size = snapshots.file_rows(files[:1], SCHEMA).nbytes  # every file's rows take as many bytes
    monkeypatch.setattr(snapshots, "FILES_KEPT_BYTES", 9 * size)  # room for nine of the ten
    snapshots.file_rows(files, SCHEMA)
    assert snapshots._files_bytes == 9 * size
    reads = _reads(monkeypatch)
    assert snapshots.file_rows(files[1:], SCHEMA)["v"].to_pylist()[:2] == [1, -1]  # the latest nine, kept
    assert reads == []
    assert snapshots.file_rows(files[:1], SCHEMA)["v"].to_pylist() == [0, 0]  # the oldest, read again
    assert reads == [[files[0]]]
