"""Schemaless writes: rows in columns for supertables that may not exist yet, written as TDengine's
schemaless writing does. A missing supertable is created (``_ts``, the fields, the tags), a missing
column or tag added, a VARCHAR or NCHAR widened to the longest value; a missing subtable is
created with the tags of its first row, and an existing one keeps its registered tags.

Everything is checked before anything changes: a field whose type differs from its column's, a
name that breaks the name rule or a supertable that is a table of another kind refuses the whole
request. Then each supertable gets one commit (a MERGE by key, so a request sent twice writes its
rows once), the earlier ones undone when a later one fails; a request writing one supertable joins
its group commit (:mod:`.group_commit`), so its rows may share the commit with concurrent requests.
Insert listeners see the rows before and after the commits, as an SQL INSERT's.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

import pyarrow as pa
import pyarrow.compute as pc

from airflow_stream_provider import model as m
from airflow_stream_provider.model.names import COLUMN, TAG, InvalidName, check_name
from airflow_stream_provider.warehouse import group_commit, listeners, writer
from airflow_stream_provider.warehouse.catalog import (
    ROLE,
    TBNAME,
    TYPE,
    Column,
    SubTable,
    TableInfo,
    WarehouseError,
)
from airflow_stream_provider.warehouse.types import arrow_type
from airflow_stream_provider.warehouse.warehouse import Warehouse

#: the time column of a supertable that schemaless writing creates
TIME_COLUMN = "_ts"
_WIDENING = ("VARCHAR", "NCHAR", "BINARY")


class TypedColumn(Protocol):
    @property
    def name(self) -> str: ...

    @property
    def dtype(self) -> m.DataType: ...

    @property
    def values(self) -> pa.Array: ...


class StableRows(Protocol):
    """The rows of one request for one supertable: times in epoch microseconds, subtable names,
    field columns and tag columns, each one value a row."""

    @property
    def stable(self) -> str: ...

    @property
    def times(self) -> pa.Array: ...

    @property
    def tbnames(self) -> pa.Array: ...

    @property
    def metrics(self) -> Sequence[TypedColumn]: ...

    @property
    def tags(self) -> Sequence[TypedColumn]: ...


class DatabaseMissing(WarehouseError):
    """The database a schemaless write names does not exist (TDengine's needs it made first)."""


@dataclass
class _Plan:
    rows: StableRows
    info: TableInfo | None  # None: the supertable is created
    create: list[Column] = field(default_factory=list)
    add: list[Column] = field(default_factory=list)
    widen: list[Column] = field(default_factory=list)


def write(warehouse: Warehouse, db: str, parts: Sequence[StableRows]) -> int:
    """Write ``parts`` into database ``db``; the number of rows written."""
    db = db.lower()
    if db not in warehouse.catalog.databases():
        raise DatabaseMissing(f"database {db} does not exist", hint=f"create it with CREATE DATABASE {db}")
    plans = [_plan(warehouse, db, part) for part in parts if len(part.times)]
    infos = [_apply(warehouse, db, plan) for plan in plans]
    tables = []
    for plan, info in zip(plans, infos, strict=True):
        subtables = _subtables(warehouse, info, plan.rows)
        tables.append((info, _arrow_rows(info, plan.rows, subtables)))
    listening = listeners.active()
    writes = [w for info, rows in tables for w in listeners.table_writes(info, rows, per_row=False)
              ] if listening else []
    listeners.before(listening, writes)
    commits: list[writer.Commit] = []
    upsert = group_commit.upsert if len(tables) == 1 else writer.upsert  # (see tables._commit)
    for info, rows in tables:
        try:
            commits.append(upsert(info.path, rows, info.key_columns))
        except Exception as err:
            kept = [str(c.path) for c in commits if not writer.undo(c)]
            raise WarehouseError(f"writing {info.qualified} failed ({type(err).__name__}: {err}); the request's "
                                 f"earlier writes were undone{'' if not kept else ', except ' + ', '.join(kept)}"
                                 ) from err
    listeners.after(listening, writes)
    return sum(rows.num_rows for _, rows in tables)


def _name(name: str, kind, what: str, stable: str) -> str:
    try:
        return check_name(name, kind)
    except InvalidName as err:
        raise WarehouseError(f"{stable}: {what} {name!r}: {err}") from None


def _plan(warehouse: Warehouse, db: str, rows: StableRows) -> _Plan:
    """What writing ``rows`` changes, checked: the columns to create, add or widen."""
    found = warehouse.catalog.lookup(m.TableName(rows.stable), db)
    if isinstance(found, SubTable) or (found is not None and not found.is_super):
        raise WarehouseError(f"{db}.{rows.stable.lower()} is a {'subtable' if isinstance(found, SubTable) else 'table'}"
                             ", not a supertable: schemaless rows of a measurement go into a supertable")
    if found is not None and (found.attached is not None or not found.writable):
        raise WarehouseError(f"{found.qualified} is attached from a Delta table written by its owner")
    wanted: list[Column] = []
    seen: set[str] = set()
    for role, columns, kind in (("metric", rows.metrics, COLUMN), ("tag", rows.tags, TAG)):
        for column in columns:
            name = _name(column.name, kind, "column" if role == "metric" else "tag", rows.stable)
            if name in seen or name == TIME_COLUMN:
                raise WarehouseError(f"{rows.stable}: the name {column.name!r} is used twice (names are "
                                     "case-insensitive here)")
            seen.add(name)
            wanted.append(Column(name, column.dtype, role))
    plan = _Plan(rows, found if isinstance(found, TableInfo) else None)
    if plan.info is None:
        metrics = [c for c in wanted if c.role == "metric"]
        tags = [c for c in wanted if c.role == "tag"]
        plan.create = [Column(TIME_COLUMN, m.DataType("TIMESTAMP"), "ts"), *metrics,
                       Column(TBNAME, m.DataType("VARCHAR", (192,)), TBNAME), *tags]
        return plan
    for new in wanted:
        have = plan.info.column(new.name)
        if have is None:
            plan.add.append(new)
        elif have.role != new.role or have.dtype.name != new.dtype.name:
            what = "tag" if have.role == "tag" else "column" if have.role == "metric" else "key column"
            raise WarehouseError(f"{plan.info.qualified}: {new.name} is the {what} {have.dtype}, but the rows give "
                                 f"it as {'tag' if new.role == 'tag' else 'field'} {new.dtype.name}")
        elif new.dtype.name in _WIDENING and have.dtype.args and new.dtype.args[0] > have.dtype.args[0]:
            plan.widen.append(Column(have.name, new.dtype, have.role))
    return plan


def _apply(warehouse: Warehouse, db: str, plan: _Plan) -> TableInfo:
    """Create, extend and widen the supertable of ``plan``; its info afterwards."""
    catalog = warehouse.catalog
    if plan.info is None:
        catalog.create_table(db, plan.rows.stable, tuple(plan.create), if_not_exists=True)
        found = catalog.lookup(m.TableName(plan.rows.stable), db)
        assert isinstance(found, TableInfo)
        return found if found.is_super else _plan_again(warehouse, db, plan)
    if plan.add or plan.widen:
        from deltalake import DeltaTable
        from deltalake.schema import Field, PrimitiveType

        table = DeltaTable(str(plan.info.path))
        if plan.add:
            table.alter.add_columns([Field(c.name, PrimitiveType(_primitive(c.dtype)), nullable=True,
                                           metadata={ROLE: c.role, TYPE: str(c.dtype)}) for c in plan.add])
        for column in plan.widen:
            table.alter.set_column_metadata(column.name, {ROLE: column.role, TYPE: str(column.dtype)})
        catalog.forget(plan.info.path)
    found = catalog.lookup(m.TableName(plan.rows.stable), db)
    assert isinstance(found, TableInfo)
    return found


def _plan_again(warehouse: Warehouse, db: str, plan: _Plan) -> TableInfo:
    raise WarehouseError(f"{db}.{plan.rows.stable} was created by another writer as a table, not a supertable")


def _primitive(dtype: m.DataType) -> str:
    kind = arrow_type(dtype)
    for test, name in ((pa.types.is_boolean, "boolean"), (pa.types.is_int8, "byte"), (pa.types.is_int16, "short"),
                       (pa.types.is_int32, "integer"), (pa.types.is_int64, "long"), (pa.types.is_float32, "float"),
                       (pa.types.is_float64, "double"), (pa.types.is_string, "string")):
        if test(kind):
            return name
    if pa.types.is_unsigned_integer(kind):
        return {8: "short", 16: "integer", 32: "long"}.get(kind.bit_width, "decimal(20,0)")
    raise WarehouseError(f"schemaless writing cannot add a {dtype} column")


def _subtables(warehouse: Warehouse, info: TableInfo, rows: StableRows) -> dict[str, SubTable]:
    """Each subtable the rows go to, created from its first row's tags when new."""
    names = pc.utf8_lower(rows.tbnames)
    unique, first = _firsts(names)
    tags = {c.name.lower(): c.values for c in rows.tags}
    out = {}
    for name, index in zip(unique, first, strict=True):
        found = warehouse.catalog.existing_subtable(info, name, f"{info.qualified}")
        if found is None:
            values = {t.name: tags[t.name][index].as_py() if t.name in tags else None for t in info.tags}
            found = warehouse.catalog.create_subtable(info, name, values, if_not_exists=True)
        out[name] = found
    return out


def _firsts(names: pa.Array) -> tuple[list[str], list[int]]:
    indexed = pa.table({"name": names, "i": pa.array(range(len(names)), pa.int64())})
    grouped = indexed.group_by("name").aggregate([("i", "min")])
    return grouped.column("name").to_pylist(), grouped.column("i_min").to_pylist()


def _arrow_rows(info: TableInfo, rows: StableRows, subtables: dict[str, SubTable]) -> pa.Table:
    """The rows in the supertable's columns: times at the database's precision, missing fields NULL,
    tags as their subtable registered them."""
    schema = info.arrow_schema()
    micros = rows.times
    if info.precision == "ms":
        micros = pc.multiply(pc.divide(micros, 1000), 1000)  # (epoch times: integer division floors them)
    names = pc.utf8_lower(rows.tbnames)
    metrics = {c.name.lower(): c.values for c in rows.metrics}
    keys = pa.array(sorted(subtables))
    positions = pc.index_in(names, value_set=keys)
    arrays = []
    for column in info.columns:
        kind = schema.field(column.name).type
        if column.role == "ts":
            arrays.append(micros.cast(pa.timestamp("us", tz="UTC")))
        elif column.role == TBNAME:
            arrays.append(names)
        elif column.role == "tag":
            values = pa.array([subtables[k].tags.get(column.name) for k in keys.to_pylist()], kind)
            arrays.append(pc.take(values, positions))
        elif column.name in metrics:
            arrays.append(metrics[column.name].cast(kind))
        else:
            arrays.append(pa.nulls(len(micros), kind))
    return pa.Table.from_arrays(arrays, schema=schema)
