"""A version's change feed read from the files its commit names, for the tables whose change feed the
kernel refuses (column mapping, name mode).

The Delta protocol defines a version's changes from its actions: the rows of its ``cdc`` files
(change data, each row with its ``_change_type``) when it has any; otherwise the rows of the files
it adds with ``dataChange`` as inserts and those of the files it removes as deletes; nothing when
every action has ``dataChange=false``. Here the data files are read with pyarrow under their
physical column names and renamed to the logical ones; partition values come from the actions.

What this reader leaves to Spark (:func:`version_changes` gives None): a version that removes files
without change files (their rows would be deletes, less any deletion vector), an added file with a
deletion vector, nested columns (their fields are mapped too), a table on an object store, and a
partition value it cannot convert. The bronze pattern, a writer appending once a second, and
Spark's own DML with the change feed on (which writes ``cdc`` files) are read here.
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import unquote

import pyarrow as pa
import pyarrow.compute as pc

from airflow_stream_provider import storage
from airflow_stream_provider.storage import Location
from airflow_stream_provider.warehouse.features import TableFeatures

#: the change feed's own columns, typed as the kernel's change feed types them
COMMIT_TYPES = (("_change_type", pa.string()), ("_commit_version", pa.uint64()),
                ("_commit_timestamp", pa.timestamp("ms")))


def version_changes(path: Location, version: int, schema: pa.Schema, features: TableFeatures) -> pa.Table | None:
    """The changes of ``version`` of the table at ``path`` whose logical schema is ``schema``: its
    columns, then ``_change_type``, ``_commit_version`` and ``_commit_timestamp``. None when the
    version holds something this reader leaves to Spark (see the module)."""
    if storage.is_remote(path) or any(pa.types.is_nested(f.type) for f in schema):
        return None
    text = storage.read_text(storage.join(path, "_delta_log", f"{version:020d}.json"))
    actions = [json.loads(line) for line in text.splitlines() if line.strip()]
    info: dict = next((a["commitInfo"] for a in actions if "commitInfo" in a), {})
    at = int(info.get("inCommitTimestamp") or info.get("timestamp") or 0)
    cdc = [a["cdc"] for a in actions if "cdc" in a]
    adds = [a["add"] for a in actions if "add" in a and a["add"].get("dataChange", True)]
    removes = [a for a in actions if "remove" in a and a["remove"].get("dataChange", True)]
    if cdc:
        files: list[tuple[dict, str | None]] = [(c, None) for c in cdc]
    elif removes or any(a.get("deletionVector") for a in adds):
        return None
    else:
        files = [(a, "insert") for a in adds]
    physical = features.physical_names
    parts = []
    for action, kind in files:
        part = _file_rows(path, action, schema, physical, kind)
        if part is None:
            return None
        n = part.num_rows
        parts.append(part.append_column(pa.field(*COMMIT_TYPES[1]), pa.array([version] * n, pa.uint64()))
                     .append_column(pa.field(*COMMIT_TYPES[2]), pa.array([at] * n, pa.timestamp("ms"))))
    out_schema = pa.schema([*schema, *(pa.field(n, t) for n, t in COMMIT_TYPES)])
    if not parts:
        return out_schema.empty_table()
    return pa.concat_tables(parts)


def _file_rows(path: Location, action: dict, schema: pa.Schema, physical: dict[str, str],
               kind: str | None) -> pa.Table | None:
    """The rows of one data or change file under the logical names, then ``_change_type`` (``kind``,
    or the file's own column for a change file); None when a partition value does not convert."""
    import pyarrow.parquet as pq

    name = unquote(action["path"])
    read = pq.read_table(name if "://" in name else str(storage.join(path, name)))
    partitions: dict[str, Any] = action.get("partitionValues") or {}
    columns = []
    for field in schema:
        source = physical.get(field.name, field.name)
        if source in partitions:
            value = partitions[source]
            try:
                column = pa.array([value] * read.num_rows, pa.string()).cast(field.type)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
                return None
        elif source in read.column_names:
            column = read.column(source)
            if column.type != field.type:
                column = _cast(column, field.type)
        else:  # a column added after the file was written
            column = pa.nulls(read.num_rows, field.type)
        columns.append(column)
    kinds = (read.column("_change_type").cast(pa.string()) if kind is None
             else pa.array([kind] * read.num_rows, pa.string()))
    return pa.table([*columns, kinds], schema=pa.schema([*schema, pa.field(*COMMIT_TYPES[0])]))


def _cast(column: Any, to: pa.DataType) -> Any:
    """A file's column as the schema types it: Spark's INT96 and nanosecond times are instants in UTC."""
    if pa.types.is_timestamp(to) and pa.types.is_timestamp(column.type):
        if column.type.tz is None and to.tz:
            column = pc.assume_timezone(column, "UTC")
        return pc.cast(column, to, safe=False)  # (nanoseconds dropped, as Delta keeps microseconds)
    return column.cast(to)
