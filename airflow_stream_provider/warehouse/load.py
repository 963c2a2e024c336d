"""Bulk load of CSV and Parquet files: ``airflow-stream load FILE INTO db.table``.

The file is read twice: a first pass converts and checks every row against the table (a bad value
names the table, the column and the row, and nothing is written), a second pass commits MERGEs of
up to ``batch_rows`` rows, so a file of that size or less loads atomically and a later write of
an existing key replaces the row, as INSERT does.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc

from airflow_stream_provider import config
from airflow_stream_provider.exceptions import StreamError, did_you_mean
from airflow_stream_provider.model import TableName
from airflow_stream_provider.progress import Progress
from airflow_stream_provider.sql.grammar.timestamps import parse_timestamp
from airflow_stream_provider.warehouse import listeners, writer
from airflow_stream_provider.warehouse.catalog import (
    TBNAME,
    Catalog,
    Column,
    SubTable,
    TableInfo,
    WarehouseError,
)
from airflow_stream_provider.warehouse.types import arrow_type

if TYPE_CHECKING:
    from airflow_stream_provider.warehouse.warehouse import Warehouse

READ_ROWS = 262_144


@dataclass(frozen=True)
class LoadReport:
    table: str
    rows: int
    seconds: float
    commits: int


def _batches(path: Path, label: str) -> Iterator[pa.RecordBatch]:
    """The file's record batches; a malformed file raises an error naming the load and the file."""
    try:
        for batch in _read(path):
            _ = batch.schema.names  # decodes the names: text that is not UTF-8 fails here
            yield batch
    except (pa.ArrowInvalid, OSError) as err:
        raise WarehouseError(f"{label}: {path.name} cannot be read: {err}") from None
    except UnicodeDecodeError as err:
        raise WarehouseError(f"{label}: {path.name} cannot be read: its text is not UTF-8 ({err.reason} at byte "
                             f"{err.start} of a name or value)", hint="save the file as UTF-8") from None


def _read(path: Path) -> Iterator[pa.RecordBatch]:
    suffix = path.suffix.lower()
    if suffix == ".parquet":
        import pyarrow.parquet as pq

        yield from pq.ParquetFile(path).iter_batches(batch_size=READ_ROWS)
    elif suffix == ".csv":
        from pyarrow import csv

        reader = csv.open_csv(path, read_options=csv.ReadOptions(block_size=16 << 20),
                              convert_options=csv.ConvertOptions(strings_can_be_null=True))
        yield from reader
    else:
        raise WarehouseError(f"{path.name}: load reads .csv (with a header line) and .parquet files")


class _Converter:
    """Casts file batches to a table's columns, checking what a cast alone would not."""

    def __init__(self, info: TableInfo, sub: SubTable | None, label: str, source: str) -> None:
        self.info, self.sub, self.label, self.source = info, sub, label, source
        allowed = list(info.data_columns)
        if info.is_super and sub is None:
            allowed += [c for c in info.columns if c.role in (TBNAME, "tag")]
        self.allowed = {c.name: c for c in allowed}
        self.rows_seen = 0
        self.mapped: set[str] = set()
        self.tag_names = [c.name for c in info.columns if c.role == "tag"]

    def columns_of(self, schema: pa.Schema) -> dict[str, Column]:
        mapping: dict[str, Column] = {}
        for name in schema.names:
            column = self.allowed.get(name.lower())
            if column is None and self.sub is not None and name.lower() in (TBNAME, *self.tag_names):
                raise WarehouseError(
                    f"{self.label}: {self.source} has column {name!r}, but {self.sub.qualified} is one subtable of "
                    f"{self.info.qualified}, whose {name} it fixes", hint=f"load the file into {self.info.qualified}, "
                    f"which takes each row's subtable from its {TBNAME}, or drop the column {name!r}")
            if column is None:
                hint = did_you_mean(name, list(self.allowed))
                if hint is None and self.source.lower().endswith(".csv"):
                    hint = (f"the first line of a CSV file names its columns ({', '.join(self.allowed)}); "
                            "is the header line missing?")
                raise WarehouseError(f"{self.label}: {self.source} has column {name!r}, which {self.info.qualified} "
                                     "does not have", hint=hint)
            if column.name in {c.name for c in mapping.values()} or name in mapping:
                raise WarehouseError(f"{self.label}: {self.source} has column {name!r} twice",
                                     hint="a file names each column once; remove or rename the other")
            mapping[name] = column
        self.mapped = {c.name for c in mapping.values()}
        required = [c.name for c in self.info.columns if c.role in ("ts", "key")]
        if self.info.is_super and self.sub is None:
            required.append(TBNAME)
        missing = [r for r in required if r not in {c.name for c in mapping.values()}]
        if missing:
            raise WarehouseError(
                f"{self.label}: {self.source} lacks column {', '.join(missing)}, which every row needs")
        return mapping

    def convert(self, batch: pa.RecordBatch) -> pa.Table:
        mapping = self.columns_of(batch.schema)
        arrays: dict[str, pa.Array] = {}
        for name, column in mapping.items():
            arrays[column.name] = self._cast(batch.column(name), column)
        first_row = self.rows_seen + 1
        self.rows_seen += batch.num_rows
        for column in self.info.columns:
            keyed = column.role in ("ts", "key") or (column.role == TBNAME and self.sub is None)
            if keyed and column.name in arrays and arrays[column.name].null_count:
                row = first_row + pc.index(pc.is_null(arrays[column.name]), True).as_py()
                raise WarehouseError(f"{self.label}: column {column.name} is empty in row {row} of {self.source}; "
                                     "it is part of the key")
        n = batch.num_rows
        if self.sub is not None:
            arrays[TBNAME] = pa.array([self.sub.name] * n, pa.string())
            for tag in self.info.tags:
                arrays[tag.name] = pa.array([self.sub.tags.get(tag.name)] * n, arrow_type(tag.dtype))
        schema = self.info.arrow_schema()
        return pa.table({f.name: arrays.get(f.name, pa.nulls(n, f.type)) for f in schema}, schema=schema)

    def _cast(self, array: pa.Array, column: Column) -> pa.Array:
        target = arrow_type(column.dtype)
        where = f"{self.label}: column {column.name} ({column.dtype}) in {self.source}"
        try:
            if column.role == "ts" or column.dtype.name == "TIMESTAMP":
                return self._timestamps(array, where)
            if column.dtype.name in ("TINYINT UNSIGNED", "SMALLINT UNSIGNED", "INT UNSIGNED", "BIGINT UNSIGNED"):
                low = pc.min(array).as_py()
                if low is not None and low < 0:
                    raise WarehouseError(f"{where}: {low} is negative")
            casted = array.cast(target, safe=True)
        except pa.ArrowException as err:
            raise WarehouseError(f"{where}: {err}") from None
        if column.dtype.name in ("BINARY", "VARCHAR", "NCHAR", "VARBINARY") and len(casted):
            sizes = pc.utf8_length(casted) if column.dtype.name == "NCHAR" else pc.binary_length(casted)
            longest = pc.max(sizes).as_py()
            if longest is not None and longest > column.dtype.args[0]:
                raise WarehouseError(f"{where}: a value of {longest} is longer than {column.dtype}")
        return casted

    def _timestamps(self, array: pa.Array, where: str) -> pa.Array:
        kind = array.type
        if pa.types.is_timestamp(kind):
            if kind.tz is None:
                array = pc.assume_timezone(array, config.timezone_name())
            return array.cast(pa.timestamp("us", tz="UTC"))
        if pa.types.is_integer(kind):
            unit = "ms" if self.info.precision == "ms" else "us"
            return array.cast(pa.int64()).cast(pa.timestamp(unit, tz="UTC")).cast(pa.timestamp("us", tz="UTC"))
        if pa.types.is_string(kind) or pa.types.is_large_string(kind):
            for parsed in (pa.timestamp("us"), pa.timestamp("us", tz="UTC")):
                try:
                    return self._timestamps(array.cast(parsed), where)
                except pa.ArrowInvalid:
                    continue
            return self._timestamps(self._parse_each(array, where), where)
        raise WarehouseError(f"{where}: {kind} values are not timestamps")

    def _parse_each(self, array: pa.Array, where: str) -> pa.Array:
        """Strings that mix zoned and local forms, one at a time; names the first that is no timestamp."""
        out = []
        for index, text in enumerate(array.to_pylist()):
            try:
                out.append(None if text is None else parse_timestamp(text))
            except ValueError as err:
                raise WarehouseError(f"{where}, row {self.rows_seen + index + 1}: {err}") from None
        return pa.array(out, pa.timestamp("us", tz="UTC"))


def load(
    warehouse: Warehouse,
    path: Path,
    target: TableName,
    *,
    batch_rows: int = 2_000_000,
    progress: Callable[[str], None] | None = None,
) -> LoadReport:
    """Load ``path`` into ``target`` in commits of at most ``batch_rows`` rows; returns what was written."""
    if batch_rows < 1:
        raise WarehouseError(f"batch_rows must be at least 1, not {batch_rows}")
    started = time.perf_counter()
    say = progress or (lambda message: None)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such file")
    db = warehouse.database_of(target)
    found = warehouse.catalog.resolve(target, db)
    sub = found if isinstance(found, SubTable) else None
    info = found.stable if isinstance(found, SubTable) else found
    label = f"load into {found.qualified}"
    converter = _Converter(info, sub, label, path.name)

    total = 0
    per_row_subtables = info.is_super and sub is None
    firsts: dict[str, dict] = {}  # each subtable's first row, for the tags of new subtables
    for batch in _batches(path, label):  # pass 1: every row converts and fits
        converted = converter.convert(batch)
        total += batch.num_rows
        if per_row_subtables:
            _first_rows(converted, firsts)
    subtables = _subtables(warehouse.catalog, info, firsts, converter, label) if per_row_subtables else {}
    say(f"{path.name}: {total:,} rows checked against {found.qualified}")

    converter = _Converter(info, sub, label, path.name)
    done = Progress(f"{path.name} into {found.qualified}", total, "rows", say)
    pending: list[pa.Table] = []
    pending_rows = written = commits = 0

    def flush() -> None:
        nonlocal pending, pending_rows, written, commits
        if not pending:
            return
        rows = pa.concat_tables(pending)
        if subtables:
            rows = _with_registered_tags(rows, info, subtables)
        listening = listeners.active()
        writes = listeners.table_writes(info, rows, per_row=False) if listening else []
        try:
            listeners.before(listening, writes)
        except StreamError as err:  # a refusing trigger stops the load here: the earlier commits stay
            raise WarehouseError(f"{err}; the load stopped after {written:,} rows in {commits} commit"
                                 f"{'s' if commits != 1 else ''}") from err
        writer.upsert(info.path, rows, info.key_columns)
        listeners.after(listening, writes)
        written += rows.num_rows
        commits += 1
        pending, pending_rows = [], 0
        done.advance(rows.num_rows)

    for batch in _batches(path, label):  # pass 2: commit
        converted = converter.convert(batch)
        offset = 0
        while offset < converted.num_rows:
            take = min(batch_rows - pending_rows, converted.num_rows - offset)
            pending.append(converted.slice(offset, take))
            pending_rows += take
            offset += take
            if pending_rows >= batch_rows:
                flush()
    flush()
    done.finish()
    return LoadReport(found.qualified, written, time.perf_counter() - started, commits)


def _first_rows(rows: pa.Table, firsts: dict[str, dict]) -> None:
    """Add the first row of each subtable in ``rows`` not yet in ``firsts`` (keyed by lower-case tbname)."""
    names = pc.utf8_lower(rows.column(TBNAME))
    indexed = pa.table({"name": names, "i": pa.array(range(rows.num_rows), pa.int64())})
    grouped = indexed.group_by("name").aggregate([("i", "min")])
    for name, index in zip(grouped.column("name").to_pylist(), grouped.column("i_min").to_pylist(), strict=True):
        if name not in firsts:
            firsts[name] = rows.slice(index, 1).to_pylist()[0]


def _subtables(catalog: Catalog, info: TableInfo, firsts: dict[str, dict], converter: _Converter,
               label: str) -> dict[str, SubTable]:
    """The subtables a supertable load writes to; new ones are created with their first row's tags."""
    has_tags = any(tag.name in converter.mapped for tag in info.tags)
    out: dict[str, SubTable] = {}
    for name, row in firsts.items():
        found = catalog.existing_subtable(info, name, label)
        if found is None:
            if not has_tags:
                raise WarehouseError(f"{label}: subtable {info.db}.{name} does not exist and "
                                     f"{converter.source} has no tag columns")
            found = catalog.create_subtable(info, name, {t.name: row[t.name] for t in info.tags}, if_not_exists=True)
        out[name] = found
    return out


def _with_registered_tags(rows: pa.Table, info: TableInfo, subtables: dict[str, SubTable]) -> pa.Table:
    """Tag columns from the registry: a subtable's tags are those it was created with."""
    names = rows.column(TBNAME)
    lowered = pc.utf8_lower(names)
    rows = rows.set_column(rows.schema.get_field_index(TBNAME), rows.schema.field(TBNAME), lowered)
    keys = pa.array(sorted(subtables))
    positions = pc.index_in(lowered, value_set=keys)
    for tag in info.tags:
        values = pa.array([subtables[k].tags.get(tag.name) for k in keys.to_pylist()], arrow_type(tag.dtype))
        index = rows.schema.get_field_index(tag.name)
        rows = rows.set_column(index, rows.schema.field(index), pc.take(values, positions))
    return rows
