"""Delta tables read by delta-rs in the process, kept from read to read: the kernel's table per path,
the snapshots of the versions read lately, and the rows of the data files read lately.

A live stream reads a few rows of a table just written to at each new version. Spark would first
rebuild the table's snapshot at the new version (a job of its own); the kernel reaches a new version
from the one it holds by reading the log entries since, and a version's files and schema, like a data
file's rows, never change once written, so each is read once however many streams ask for it.

A table whose files pyarrow cannot read as they are (deletion vectors, column mapping, v2 checkpoints:
:mod:`.features`) is read by the kernel's own scan, which applies deletion vectors and reads columns
by their logical names; its file statistics are named by logical names here too.
"""

from __future__ import annotations

import collections
import json
import logging
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as pds
from pyspark.sql import types as T

from airflow_stream_provider.storage import is_remote
from airflow_stream_provider.warehouse import writer
from airflow_stream_provider.warehouse.features import TableFeatures, features_of

log = logging.getLogger(__name__)

#: reader features that leave a data file's rows as they are, under its physical column names, when
#: the file has no deletion vector
FILE_READ_FEATURES = frozenset({"deletionVectors", "columnMapping", "timestampNtz", "v2Checkpoint",
                                "vacuumProtocolCheck"})


@dataclass(frozen=True)
class Snapshot:
    """What a reader of a table's few rows needs of a table's version: its files (add actions with
    statistics, named by the columns' logical names), its schema as Spark and Arrow type it, whether its
    files are plain Parquet (no partitions, column mapping or deletion vectors: reader version 1), and
    its protocol and configuration."""

    version: int
    files: pa.Table
    schema: T.StructType
    arrow_schema: pa.Schema
    plain: bool
    features: TableFeatures
    partitioned: bool = False
    #: the files (as the add actions name them) that carry a deletion vector; None: not looked up
    deletion_vector_files: frozenset[str] | None = None

    def files_as_they_are(self, files: pa.Table) -> bool:
        """Whether ``files`` (some of this version's add actions) hold their rows as they are, under
        the names of :meth:`file_schema`: a plain table's do; so do a table's with column mapping by
        name and deletion vectors, when no partition adds values and none of ``files`` carries a
        deletion vector."""
        if self.plain:
            return True
        if not _files_readable(self.features, self.partitioned):
            return False
        if not self.features.deletion_vectors:
            return True
        marked = self.deletion_vector_files
        return marked is not None and not any(unquote(f) in marked for f in files["path"].to_pylist())

    def file_schema(self) -> pa.Schema:
        """The Arrow schema of the table's data files: its columns under their physical names."""
        physical = self.features.physical_names
        return pa.schema([f.with_name(physical.get(f.name, f.name)) for f in self.arrow_schema])


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
        features = features_of(table)
        found = Snapshot(table.version(), logical_stats(pa.table(table.get_add_actions(flatten=True)), features),
                         T.StructType.fromJson(json.loads(table.schema().to_json())),
                         pa.schema(table.schema().to_arrow()),
                         not table.metadata().partition_columns and features.plain_files, features,
                         bool(table.metadata().partition_columns), _deletion_vector_files(path, table, features))
        if key is not None:
            _snapshots[key] = found
        while len(_snapshots) > _SNAPSHOTS_KEPT:
            _snapshots.popitem(last=False)
        return found


def _files_readable(features: TableFeatures, partitioned: bool) -> bool:
    """Whether a table's data files, but for their deletion vectors, hold its rows as they are."""
    return not partitioned and features.column_mapping in ("none", "name") \
        and features.reader_features <= FILE_READ_FEATURES


def _deletion_vector_files(path: str, table: Any, features: TableFeatures) -> frozenset[str] | None:
    """The files of a local table's version that carry a deletion vector (their add actions do not
    say), when its other files may be read as they are; None otherwise."""
    partitioned = bool(table.metadata().partition_columns)
    if is_remote(path) or not features.deletion_vectors or not _files_readable(features, partitioned):
        return None
    base = Path(path).resolve()
    found = set()
    for batch in pa.RecordBatchReader.from_stream(table.deletion_vectors()):
        for uri in batch.column("filepath").to_pylist():
            local = Path(unquote(urlsplit(uri).path)) if uri.startswith("file:") else Path(uri)
            try:
                found.add(local.resolve().relative_to(base).as_posix())
            except ValueError:  # a file outside the table's folder: the kernel's scan reads the table
                return None
    return frozenset(found)


def logical_stats(files: pa.Table, features: TableFeatures) -> pa.Table:
    """The add actions' statistics columns (``min.<column>``...) named by the logical column names: a
    column-mapped table's statistics name the columns as its files do."""
    physical = features.physical_names
    if not physical:
        return files
    logical = {v: k for k, v in physical.items()}
    names = []
    for name in files.column_names:
        stat, _, column = name.partition(".")
        names.append(f"{stat}.{logical[column]}" if column in logical else name)
    return files.rename_columns(names)


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
    except DeltaError as err:  # a table feature the kernel cannot read
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


def dataset(path: str, version: int, *, between: tuple[str, datetime | None, datetime | None] | None = None,
            columns: Sequence[str] | None = None) -> pds.Dataset:
    """The table at ``path`` as of ``version`` as an Arrow dataset, read by the kernel.

    :param between: (a time column, its lowest and highest value, either None for no bound): only
        rows in that span need be in the dataset. A table pyarrow reads as its files is a dataset of
        them, filtered by its caller; the others are read by the kernel's scan now, with the span as
        its predicate, into a dataset in memory.
    :param columns: the columns the caller reads (None: all)."""
    with _snapshots_lock:
        table = _table_at(path, version)
        if features_of(table).pyarrow_reads:
            return table.to_pyarrow_dataset()
        read = table.scan(columns=None if columns is None else list(columns),
                          predicate=None if between is None else _span(*between))
        return pds.dataset(plain_strings(pa.RecordBatchReader.from_stream(read).read_all()))


def rows(path: str, version: int, columns: Sequence[str] | None = None) -> pa.Table:
    """The rows of the table at ``path`` as of ``version`` (a history fill: the table as it is), read
    by the kernel: deletion vectors applied, columns by their logical names."""
    from deltalake import DeltaTable

    return table_rows(DeltaTable(path, version=version), columns)


def table_rows(table: Any, columns: Sequence[str] | None = None) -> pa.Table:
    """The rows of a kernel ``DeltaTable`` at the version it holds, as :func:`rows` reads them."""
    if features_of(table).pyarrow_reads:
        return plain_strings(table.to_pyarrow_table(columns=None if columns is None else list(columns)))
    read = table.scan(columns=None if columns is None else list(columns))
    return plain_strings(pa.RecordBatchReader.from_stream(read).read_all())


def _span(column: str, low: datetime | None, high: datetime | None) -> str | None:
    """The kernel scan's predicate (DataFusion SQL) for ``low <= column <= high``. A bound is an
    instant written in UTC: a ``timestamp_ntz`` column compares its wall clock with it as UTC."""
    quoted = '"' + column.replace('"', '""') + '"'
    parts = [f"{quoted} {op} '{_utc(b)}'" for op, b in ((">=", low), ("<=", high)) if b is not None]
    return " AND ".join(parts) or None


def _utc(value: datetime) -> str:
    aware = value if value.tzinfo is not None else value.replace(tzinfo=UTC)
    return aware.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def plain_strings(table: pa.Table) -> pa.Table:
    """The kernel scans strings as ``string_view`` and partitions as dictionaries: plain strings and
    values, which every Arrow and pandas operation takes."""
    fields = []
    changed = False
    for field in table.schema:
        kind = field.type
        if pa.types.is_dictionary(kind):
            kind, changed = kind.value_type, True
        if pa.types.is_string_view(kind):
            kind, changed = pa.string(), True
        elif pa.types.is_binary_view(kind):
            kind, changed = pa.binary(), True
        fields.append(pa.field(field.name, kind))
    return table.cast(pa.schema(fields)) if changed else table

