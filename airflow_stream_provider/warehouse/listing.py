"""SHOW STABLES, SHOW TABLES, DESCRIBE and ``information_schema.ins_stables``/``ins_tables``: the
tables of the warehouse, an attached table with the location it is read from and whether it may
be written."""

from __future__ import annotations

import pyarrow as pa

from airflow_stream_provider import model as m
from airflow_stream_provider.model import TableName
from airflow_stream_provider.warehouse import mapping
from airflow_stream_provider.warehouse.catalog import SubTable, TableInfo, WarehouseError
from airflow_stream_provider.warehouse.result import Result
from airflow_stream_provider.warehouse.warehouse import Warehouse

#: (column, Arrow type) of a SHOW STABLES / SHOW TABLES row
TABLE_COLUMNS = (
    ("db_name", pa.string()),
    ("table_name", pa.string()),
    ("type", pa.string()),  # SUPER_TABLE, NORMAL_TABLE, CHILD_TABLE
    ("columns", pa.int32()),
    ("tags", pa.int32()),
    ("stable_name", pa.string()),  # a subtable's supertable
    ("source", pa.string()),  # an attached table's location; None: the warehouse's own
    ("access", pa.string()),  # read-only, writable
)


def _row(db: str, name: str, found: TableInfo | SubTable) -> dict:
    if isinstance(found, SubTable):
        return {"db_name": db, "table_name": name, "type": "CHILD_TABLE", "columns": len(found.stable.data_columns),
                "tags": len(found.stable.tags), "stable_name": found.stable.name, "source": None, "access": "writable"}
    return {"db_name": db, "table_name": name, "type": "SUPER_TABLE" if found.is_super else "NORMAL_TABLE",
            "columns": len(found.data_columns), "tags": len(found.tags), "stable_name": None,
            "source": None if found.attached is None else str(found.attached),
            "access": "writable" if found.writable else "read-only"}


def table_rows(warehouse: Warehouse, dbs: list[str], *, stable: bool | None) -> pa.Table:
    """The tables of ``dbs`` (``stable``: supertables only; False: the others; None: all). A table
    that cannot be read now (an attached table its owner changed) is listed with its error as source."""
    rows = []
    for db in dbs:
        for name in warehouse.catalog.names(db):
            try:
                found = warehouse.catalog.resolve(TableName(name), db)
            except WarehouseError as err:
                rows.append({"db_name": db, "table_name": name, "type": "BROKEN", "source": str(err)})
                continue
            is_super = isinstance(found, TableInfo) and found.is_super
            if stable is None or stable == is_super:
                rows.append(_row(db, name, found))
    schema = pa.schema(TABLE_COLUMNS)
    return pa.Table.from_pylist([{k: r.get(k) for k in schema.names} for r in rows], schema=schema)


def show_tables(warehouse: Warehouse, stmt: m.ShowTables) -> Result:
    db = stmt.db.lower() if stmt.db else warehouse.database
    if db is None:
        raise WarehouseError("no database selected: write SHOW db.STABLES or USE a database first")
    warehouse.catalog.precision(db)  # the database exists
    table = table_rows(warehouse, [db], stable=stmt.stable)
    what = "supertable" if stmt.stable else "table"
    return Result(stmt, f"{table.num_rows} {what}{'s' if table.num_rows != 1 else ''}", table=table)


def ins_stables(warehouse: Warehouse) -> pa.Table:
    """``information_schema.ins_stables``: the supertables of every database."""
    return table_rows(warehouse, warehouse.catalog.databases(), stable=True)


def ins_tables(warehouse: Warehouse) -> pa.Table:
    """``information_schema.ins_tables``: the regular tables and subtables of every database."""
    return table_rows(warehouse, warehouse.catalog.databases(), stable=False)


def describe(warehouse: Warehouse, stmt: m.Describe) -> Result:
    db = warehouse.database_of(stmt.name)
    found = warehouse.catalog.resolve(stmt.name, db)
    info = found.stable if isinstance(found, SubTable) else found
    sources = dict(zip([c.name for c in info.columns], mapping.sources(info.path, [c.name for c in info.columns]),
                       strict=True)) if info.attached is not None else {}
    notes = {"ts": "", "key": "COMPOSITE KEY", "metric": "", "tbname": "TBNAME", "tag": "TAG"}
    table = pa.table({
        "field": [c.name for c in info.columns],
        "type": [str(c.dtype) for c in info.columns],
        "note": [notes[c.role] for c in info.columns],
        "source": [sources.get(c.name) for c in info.columns],
    }, schema=pa.schema([(name, pa.string()) for name in ("field", "type", "note", "source")]))
    where = f" (attached from {info.attached}, {'writable' if info.writable else 'read-only'})" if info.attached else ""
    return Result(stmt, f"{found.qualified}: {table.num_rows} columns{where}", table=table)
