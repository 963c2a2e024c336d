"""The column mapping of attached tables: Delta tables the project did not create, read under the
model's names (the timestamp, ``tbname``, the tags, the metrics) without being rewritten.

This is the one place where an attached table's columns are renamed. Every reader of a table's
rows goes through it: Spark SQL reads the table through the projection :func:`select_list` gives
(``warehouse.resolve.table_source``, which the DuckDB path also reads), Spark DataFrames through
:func:`frame`, and the Delta Lake Rust kernel's Arrow tables (change feed, snapshots, late rows)
through :func:`arrow` and :func:`sources`. A table of the warehouse's own has no mapping, and each
of these returns what it was given.

The mappings of a process are registered by the catalog when it resolves an attached table
(:func:`register`), keyed by the table's location, so a reader that holds only a location finds
its mapping. The catalog reads the table's schema on every resolution and checks the mapping
against it (:func:`check`): a mapped column the owner dropped or retyped fails the statement or
run that reads it, before a row is read.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pyarrow as pa

from airflow_stream_provider import storage
from airflow_stream_provider.exceptions import StreamError, did_you_mean
from airflow_stream_provider.model import DataType
from airflow_stream_provider.storage import Location

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

CHANGE_FEED = "delta.enableChangeDataFeed"
#: the columns a change feed adds after the table's, kept as they are
CHANGE_COLUMNS = ("_change_type", "_commit_version", "_commit_timestamp")

#: Delta's primitive types and the TDengine type a column of each reads as
_TYPES = {
    "boolean": DataType("BOOL"),
    "byte": DataType("TINYINT"),
    "short": DataType("SMALLINT"),
    "integer": DataType("INT"),
    "long": DataType("BIGINT"),
    "float": DataType("FLOAT"),
    "double": DataType("DOUBLE"),
    "string": DataType("VARCHAR", (16384,)),
    "binary": DataType("VARBINARY", (16384,)),
    "timestamp": DataType("TIMESTAMP"),
    "timestamp_ntz": DataType("TIMESTAMP"),
}
_ROLE_NAMES = {"ts": "TIMESTAMP", "tbname": "TBNAME", "tag": "TAGS", "metric": "COLUMNS"}


class MappingError(StreamError):
    """An attached table's mapping does not fit the table, or the table is not a Delta table."""

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        self.message = message
        self.hint = hint
        super().__init__(message + (f" ({hint})" if hint else ""))


@dataclass(frozen=True)
class Mapped:
    """Model column ``name`` (role ``role``, TDengine type ``dtype``) read from the table's ``source``."""

    name: str
    source: str
    role: str
    dtype: DataType
    delta_type: str  # the column's type in the table when it was read


_lock = threading.Lock()
_mappings: dict[str, tuple[Mapped, ...]] = {}


def register(path: Location, columns: tuple[Mapped, ...]) -> None:
    """Read the table at ``path`` under ``columns`` from now on, in this process."""
    with _lock:
        _mappings[str(path)] = columns


def unregister(path: Location) -> None:
    with _lock:
        _mappings.pop(str(path), None)


def of(path: Location) -> tuple[Mapped, ...] | None:
    """The mapping of the table at ``path``; None: a table of the warehouse's own."""
    with _lock:
        return _mappings.get(str(path))


def select_list(path: Location) -> list[tuple[str, str]] | None:
    """(table column, model name) pairs to read the table at ``path`` by, or None: read it as it is."""
    columns = of(path)
    return None if columns is None else [(c.source, c.name) for c in columns]


def sources(path: Location, names: Iterable[str]) -> list[str]:
    """The table's columns that hold the model columns ``names`` (a change-feed column: itself)."""
    columns = of(path)
    if columns is None:
        return list(names)
    by_name = {c.name: c.source for c in columns}
    return [by_name.get(n, n) for n in names]


def arrow(path: Location, table: pa.Table) -> pa.Table:
    """Rows of the table at ``path`` as the kernel read them, under the model's names: the mapped
    columns in the model's order, then the change feed's columns when there are any."""
    columns = of(path)
    if columns is None:
        return table
    present = set(table.column_names)
    kept = [c for c in columns if c.source in present]
    extra = [n for n in CHANGE_COLUMNS if n in present]
    return pa.table([table[c.source] for c in kept] + [table[n] for n in extra],
                    names=[c.name for c in kept] + extra)


def frame(path: Location, df: DataFrame) -> DataFrame:
    """A Spark DataFrame of the table at ``path`` under the model's names (change-feed columns kept)."""
    pairs = select_list(path)
    if pairs is None:
        return df
    from pyspark.sql import functions as F

    extra = [n for n in CHANGE_COLUMNS if n in df.columns]
    return df.select(*[F.col(f"`{s}`").alias(n) for s, n in pairs], *extra)


# --- the table's own facts -------------------------------------------------------------------------


@dataclass(frozen=True)
class Described:
    """What the table at a location says of itself: its columns' Delta types, its properties."""

    types: dict[str, str]  # column -> Delta type ("integer", "timestamp", "struct<...>"...)
    configuration: dict[str, str]
    version: int

    @property
    def change_feed(self) -> bool:
        return self.configuration.get(CHANGE_FEED, "false").lower() == "true"


def describe(path: Location) -> Described:
    """The schema and properties of the Delta table at ``path``; raises :class:`MappingError` when
    there is none there."""
    from deltalake import DeltaTable
    from deltalake.exceptions import DeltaError, TableNotFoundError

    if storage.is_remote(path):
        storage.export_credentials()
    try:
        table = DeltaTable(str(path))
    except TableNotFoundError:
        raise MappingError(f"{path} is not a Delta table (no _delta_log with a commit there)",
                           hint="give the folder or s3:// URL of the table itself") from None
    except (DeltaError, OSError) as err:
        raise MappingError(f"{path}: the Delta table cannot be read: {err}") from None
    types = {f.name: _type_text(f.type) for f in table.schema().fields}
    return Described(types, dict(table.metadata().configuration), table.version())


def _type_text(kind: object) -> str:
    text = getattr(kind, "type", None)
    return text if isinstance(text, str) else str(kind)


def check(path: Location, label: str, wanted: Sequence[tuple[str, str, str]], described: Described,
          attached_types: Mapping[str, str] | None = None) -> tuple[Mapped, ...]:
    """The mapping of ``(model name, table column, role)`` entries onto the table ``described``,
    each with the TDengine type of its column; raises :class:`MappingError` naming the first
    column that is missing, of a type its role cannot hold, or (``attached_types``: each column's
    Delta type when the table was attached) of another type than when it was attached.

    :param label: the table's qualified name, for messages
    """
    actual = {name.lower(): name for name in described.types}
    out = []
    for name, source, role in wanted:
        found = actual.get(source.lower())
        clause = f"MAP {_ROLE_NAMES[role]}"
        if found is None:
            raise MappingError(f"{label}: {clause} names column {source}, which {path} does not have",
                               hint=did_you_mean(source, list(described.types)) or
                               f"its columns are {', '.join(described.types)}")
        delta_type = described.types[found]
        was = (attached_types or {}).get(found)
        if was is not None and was != delta_type:
            raise MappingError(f"{label}: {clause} {found} was {was} when the table was attached and is {delta_type} "
                               "now", hint="DROP the table and attach it again to read the new type")
        out.append(Mapped(name, found, role, _model_type(label, clause, found, delta_type, role), delta_type))
    return tuple(out)


def _model_type(label: str, clause: str, column: str, delta_type: str, role: str) -> DataType:
    if role == "ts" and not delta_type.startswith("timestamp"):
        raise MappingError(f"{label}: {clause} {column} is {delta_type}; the timestamp column must be a "
                           "timestamp (or timestamp_ntz)")
    if role == "tbname" and delta_type != "string":
        raise MappingError(f"{label}: {clause} {column} is {delta_type}; the subtable name column must be a string")
    if delta_type.startswith("decimal"):
        precision, _, scale = delta_type[len("decimal("):-1].partition(",")
        return DataType("DECIMAL", (int(precision), int(scale or 0)))
    dtype = _TYPES.get(delta_type)
    if dtype is None:
        raise MappingError(f"{label}: {clause} {column} is {delta_type}, which no TDengine column holds",
                           hint="map columns of numbers, strings, booleans, binary or timestamps")
    return dtype


def missing_feed_message(path: Location, label: str) -> str:
    return (f"{label}: the Delta table at {path} has no change data feed ({CHANGE_FEED} is not true), "
            "which streams read its new rows from; turn it on with ALTER TABLE delta.`"
            f"{path}` SET TBLPROPERTIES ({CHANGE_FEED} = true), or attach it with ENABLE CHANGE FEED")


def enable_change_feed(path: Location) -> None:
    """Turn the table's change data feed on: one commit of its properties, no data file written."""
    from deltalake import DeltaTable

    if storage.is_remote(path):
        storage.export_credentials()
    DeltaTable(str(path)).alter.set_table_properties({CHANGE_FEED: "true"})


def to_sources(path: Location, table: pa.Table) -> pa.Table:
    """Rows under the model's names as the table at ``path`` holds them (a WRITABLE attached table's
    INSERT and DELETE): each column under its table column's name."""
    columns = of(path)
    if columns is None:
        return table
    by_name = {c.name: c.source for c in columns}
    renamed = [pa.field(by_name.get(f.name, f.name), f.type, f.nullable) for f in table.schema]
    return pa.Table.from_arrays(table.columns, schema=pa.schema(renamed))


def renamer(path: Location) -> Callable[[DataFrame], DataFrame]:
    """:func:`frame` of ``path`` as a function (``spark.read....load(path).transform(renamer(path))``)."""
    return functools.partial(frame, path)
