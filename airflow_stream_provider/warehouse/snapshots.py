"""Delta tables read by delta-rs in the process, kept from read to read: the kernel's table per path,
the snapshots of the versions read lately, and the rows of the data files read lately.

A live stream reads a few rows of a table just written to at each new version. Spark would first
rebuild the table's snapshot at the new version (a job of its own); the kernel reaches a new version
from the one it holds by reading the log entries since, and a version's files and schema, like a data
file's rows, never change once written, so each is read once however many streams ask for it.
"""

from __future__ import annotations

import collections
import json
import logging
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as pds
from pyspark.sql import types as T

from airflow_stream_provider.storage import is_remote
from airflow_stream_provider.warehouse import writer

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Snapshot:
    """What a reader of a table's few rows needs of a table's version: its files (add actions with
    statistics), its schema as Spark and Arrow type it, and whether its files are plain Parquet (no
    partitions, column mapping or deletion vectors: reader version 1)."""

    version: int
    files: pa.Table
    schema: T.StructType
    arrow_schema: pa.Schema
    plain: bool


#: the kernel's table kept per path, at the latest version read, with what identified that
#: version's commit file then (:func:`~airflow_stream_provider.warehouse.writer.commit_identity`)
_tables: dict[str, tuple[Any, tuple | None]] = {}
#: the snapshots of a local table's versions read lately, per (path, version, its commit file's
#: inode and time: a table dropped and made again starts its versions anew): the streams on one
#: table read each of its versions in turn
_snapshots: collections.OrderedDict[tuple, Snapshot] = collections.OrderedDict()
_SNAPSHOTS_KEPT = 64
_snapshots_lock = threading.Lock()


def _table_at(path: str, version: int | None) -> Any:
    """The kernel's table at ``path`` as of ``version`` (None: the latest); call under the lock.

    The table is kept from call to call: a live stream reads its trigger table at each new version,
    which an open table reaches by reading the log entries since (milliseconds) rather than the whole
    log again. The kernel's table is not shared between threads: it is read under a lock."""
    from deltalake import DeltaTable

    table, seen = _tables.get(path, (None, None))
    if table is not None and not is_remote(path) and writer.commit_identity(path, table.version()) != seen:
        table = None  # the table was dropped and made again since
    if table is None or (version is not None and version < table.version()):
        table = DeltaTable(path, version=version)
    elif version is None:
        table.update_incremental()
    elif version > table.version():
        table.load_as_version(version)
    if version is None or table.version() == version:
        _tables[path] = (table, None if is_remote(path) else writer.commit_identity(path, table.version()))
    else:  # asked for a version before the one kept: a table of its own
        table = DeltaTable(path, version=version)
    return table


def snapshot(path: str, version: int | None) -> Snapshot:
    """The Delta table at ``path`` as of ``version`` (None: the latest). A version is read once
    however many streams ask for it: its files and schema never change."""
    identity = () if version is None or is_remote(path) else writer.commit_identity(path, version)
    key = (path, version, *identity) if identity else None
    with _snapshots_lock:
        if key is not None and (found := _snapshots.get(key)) is not None:
            _snapshots.move_to_end(key)
            return found
        table = _table_at(path, version)
        found = Snapshot(table.version(), pa.table(table.get_add_actions(flatten=True)),
                         T.StructType.fromJson(json.loads(table.schema().to_json())),
                         pa.schema(table.schema().to_arrow()),
                         not table.metadata().partition_columns and table.protocol().min_reader_version < 2)
        if key is not None:
            _snapshots[key] = found
        while len(_snapshots) > _SNAPSHOTS_KEPT:
            _snapshots.popitem(last=False)
        return found


def table_scan(path: str, limit: int) -> pds.Dataset | None:
    """The latest version of the Delta table at ``path``, as a dataset DuckDB scans for the columns
    and rows a query reads, when its files hold at most ``limit`` rows in all; None: they hold
    more (or some file does not say), or the kernel cannot read the table."""
    from deltalake.exceptions import DeltaError

    try:
        found = snapshot(path, None)
    except DeltaError as err:
        log.info("reading %s with Spark: %s", path, err)
        return None
    records = found.files["num_records"]
    if records.null_count or (pc.sum(records).as_py() or 0) > limit:
        return None
    if found.plain and not is_remote(path):
        names = [str(Path(path) / unquote(f)) for f in found.files["path"].to_pylist()]
        return pds.dataset(names, format="parquet", schema=found.arrow_schema)
    try:
        return dataset(path, found.version)
    except DeltaError as err:  # a table feature the kernel cannot read (deletion vectors)
        log.info("reading %s with Spark: %s", path, err)
        return None


#: the rows of data files read lately, per (file, the table's schema then), up to this many bytes
#: in all: a Delta data file never changes once written, and the streams on one table read the
#: same recent files for their windows, each batch of each stream
FILES_KEPT_BYTES = 64 * 1024 * 1024
_files: collections.OrderedDict[tuple[str, str], pa.Table] = collections.OrderedDict()
_files_bytes = 0
_files_lock = threading.Lock()


def file_rows(names: Sequence[str], schema: pa.Schema) -> pa.Table:
    """The rows of the local Parquet data files ``names``, in order, as ``schema`` types them (a
    column a file lacks, added to the table since, is NULL), each file read once while kept."""
    global _files_bytes
    typed = schema.to_string()
    parts: list[pa.Table | None] = []
    with _files_lock:
        for name in names:
            found = _files.get((name, typed))
            if found is not None:
                _files.move_to_end((name, typed))
            parts.append(found)
    missing = [name for name, part in zip(names, parts) if part is None]
    if missing:
        fresh = {name: pds.dataset([name], format="parquet", schema=schema).to_table() for name in missing}
        with _files_lock:
            for name, rows in fresh.items():
                if (name, typed) not in _files and rows.nbytes <= FILES_KEPT_BYTES // 8:
                    _files[(name, typed)] = rows
                    _files_bytes += rows.nbytes
            while _files_bytes > FILES_KEPT_BYTES:
                _, dropped = _files.popitem(last=False)
                _files_bytes -= dropped.nbytes
        parts = [fresh[name] if part is None else part for name, part in zip(names, parts)]
    return pa.concat_tables(parts) if parts else schema.empty_table()


def dataset(path: str, version: int) -> pds.Dataset:
    """The table at ``path`` as of ``version`` as an Arrow dataset, read by the kernel."""
    with _snapshots_lock:
        return _table_at(path, version).to_pyarrow_dataset()

