"""IoTDB devices read from a Delta table the project did not create (``CREATE DEVICES root.plant
FROM DELTA '...' MAP (TIME t, DEVICE d, MEASUREMENTS (...))``).

The attached database is recorded in ``<db>/.database.json`` beside its IoTDB path (``"attached":
{"location", "columns"}``); the warehouse folder holds nothing else, the rows stay where their
owner keeps them. Its columns are renamed by the one mapping layer (:mod:`..mapping`): the time
column reads as ``ts``, the device column as the tag ``device``, each measurement under its column
name; ``tbname``, the device's full path, is the prefix and the device value (``root.plant.m1``).

The devices are the distinct values of the device column, read at each resolution (NULL: no
device). A value must be a path node written without backquotes (letters, digits and ``_``, not
starting with a digit: ``m1``, not ``bad.node`` or ``d-1``); another fails the attach, or later the
statement that reads it, naming the value. Measurements keep their column's type (boolean, integer, long, float, double,
string; others are refused at attach). The devices are read-only: INSERT, DELETE and DROP
TIMESERIES are refused; DROP/DELETE DATABASE of the prefix detaches it and leaves the table as it is.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from sqlglot import exp

from airflow_stream_provider import model as m
from airflow_stream_provider.exceptions import read_json_object
from airflow_stream_provider.model.names import shown
from airflow_stream_provider.model.series import device_problem, node_problem
from airflow_stream_provider.warehouse import mapping
from airflow_stream_provider.warehouse.catalog import WarehouseError
from airflow_stream_provider.warehouse.resolve import delta_table

if TYPE_CHECKING:
    from airflow_stream_provider.warehouse.catalog import Catalog
    from airflow_stream_provider.warehouse.series.store import SeriesDatabase

#: Delta types and the IoTDB type a measurement of each reads as
SERIES_TYPES = {
    "boolean": m.SeriesType.BOOLEAN,
    "byte": m.SeriesType.INT32,
    "short": m.SeriesType.INT32,
    "integer": m.SeriesType.INT32,
    "long": m.SeriesType.INT64,
    "float": m.SeriesType.FLOAT,
    "double": m.SeriesType.DOUBLE,
    "string": m.SeriesType.TEXT,
}
_LABELS = {"ts": "TIME", "tbname": "DEVICE", "metric": "MEASUREMENTS"}


def entry_of(stmt: m.AttachDevices, location: str) -> dict:
    """What ``.database.json`` records of the attach: each measurement under a column name of its own."""
    taken = {"ts", "tbname", "device"}
    columns = [{"name": "ts", "source": stmt.timestamp.source, "role": "ts"},
               {"name": "device", "source": stmt.device.source, "role": "tbname"}]
    for item in stmt.measurements:
        base = re.sub(r"[^a-z0-9_]", "_", item.name.lower())[:56] or "m"
        column, n = base, 2
        while column in taken:
            column, n = f"{base}_{n}", n + 1
        taken.add(column)
        columns.append({"name": column, "source": item.source, "role": "metric", "measurement": item.name})
    return {"location": location, "columns": columns}


def check(path: m.SeriesPath, entry: dict) -> tuple[mapping.Mapped, ...]:
    """The mapping of ``entry`` checked against the table as it is now, and registered for its
    readers; a clear error naming the clause when a column is missing or of a wrong type."""
    location = entry["location"]
    label = f"the devices of {path}"
    try:
        described = mapping.describe(location)
        columns = mapping.check(location, label, [(c["name"], c["source"], c["role"]) for c in entry["columns"]],
                                described, entry.get("types"))
    except mapping.MappingError as err:
        raise WarehouseError(_iotdb_words(err.message), hint=err.hint) from None
    for column in columns:
        if column.role == "metric" and column.delta_type not in SERIES_TYPES:
            raise WarehouseError(f"{label}: MAP MEASUREMENTS {column.source} is {column.delta_type}, which no IoTDB "
                                 "series holds", hint="map columns of booleans, numbers or strings")
    mapping.register(location, columns)
    return columns


def _iotdb_words(message: str) -> str:
    for role, word in (("TIMESTAMP", "TIME"), ("TBNAME", "DEVICE"), ("COLUMNS", "MEASUREMENTS")):
        message = message.replace(f"MAP {role} ", f"MAP {word} ")
    return message.replace("the subtable name column must be a string", "the device column must be a string")


def registry(db: SeriesDatabase, entry: dict) -> tuple[dict[str, dict], dict[str, dict]]:
    """The devices and measurement columns of the attached ``db`` (as ``.series.json`` holds them):
    one device per distinct value of the device column (sorted), each with every mapped measurement."""
    from deltalake import DeltaTable

    columns = check(db.path, entry)
    device_source = next(c.source for c in columns if c.role == "tbname")
    values = DeltaTable(str(entry["location"])).to_pyarrow_table(columns=[device_source])[device_source]
    names = sorted({v for v in values.unique().to_pylist() if v is not None})
    measured = [(c, next(e["measurement"] for e in entry["columns"] if e["name"] == c.name))
                for c in columns if c.role == "metric"]
    series = [{"name": name, "type": SERIES_TYPES[c.delta_type].value, "column": c.name, "encoding": "PLAIN",
               "compression": "UNCOMPRESSED"} for c, name in measured]
    kinds = {name: {"column": c.name, "type": SERIES_TYPES[c.delta_type].value} for c, name in measured}
    devices: dict[str, dict] = {}
    for value in names:
        device = device_path(db.path, value, device_source)
        devices[str(device)] = {"nodes": list(device.nodes), "aligned": True, "series": series}
    return devices, kinds


def device_path(prefix: m.SeriesPath, value: str, device_source: str) -> m.SeriesPath:
    """The device a value of the device column names under ``prefix``; an error naming the value
    when it is no path node."""
    device = m.SeriesPath((*prefix.nodes, value))
    problem = node_problem(value) or device_problem(device)
    if problem is None and str(device) != f"{prefix}.{value}":
        problem = "a device node here is written without backquotes: letters, digits and _, not starting with a digit"
    if problem is not None:
        raise WarehouseError(f"the devices of {prefix}: the DEVICE column {device_source} holds {shown(value)}, "
                             f"which is not a device node: {problem}")
    return device


def measurements(entry: dict, columns: tuple[mapping.Mapped, ...]) -> list[tuple[str, str, m.SeriesType]]:
    """(measurement, its column under the model's names, its IoTDB type) of each mapped measurement."""
    names = {e["name"]: e["measurement"] for e in entry["columns"] if e["role"] == "metric"}
    return [(names[c.name], c.name, SERIES_TYPES[c.delta_type]) for c in columns if c.role == "metric"]


def source(db: SeriesDatabase) -> exp.Expr:
    """The rows of the attached ``db`` for a FROM clause: the table's columns under the model's
    names (:func:`mapping.select_list`), with ``tbname`` the device's full path."""
    pairs = mapping.select_list(db.table) or []
    ntz = {c.source for c in mapping.of(db.table) or () if c.delta_type == "timestamp_ntz"}
    items: list[exp.Expr] = []
    for s, n in pairs:
        read: exp.Expr = exp.column(s, quoted=True)
        if s in ntz:  # its wall clock taken in UTC (the sessions' time zone), as the TDengine form reads it
            read = exp.Cast(this=read, to=exp.DataType.build("TIMESTAMP"))
        items.append(exp.alias_(read, n, quoted=True))
    device = next(s for s, n in pairs if n == "device")
    prefix = exp.Literal.string(str(db.path) + ".")
    items.append(exp.alias_(exp.func("concat", prefix, exp.column(device, quoted=True)), "tbname", quoted=True))
    return exp.select(*items).from_(delta_table(db.table)).subquery()


def reaches(pattern: m.SeriesPath, db: SeriesDatabase) -> bool:
    """Whether ``pattern`` can match a series of the database ``db``."""
    return db.contains(pattern) or pattern.matches(db.path) or pattern.reaches_below(db.path)


def refuse_write(db: SeriesDatabase, what: str) -> None:
    if db.attached:
        raise WarehouseError(f"{db.path} is attached from the Delta table at {db.table}, read-only: {what} would "
                             "change its owner's data", hint="write to the table with its owner's tools")



def recorded(db: SeriesDatabase, catalog: Catalog) -> dict:
    """What ``.database.json`` records of the attached ``db`` (:func:`entry_of`)."""
    return read_json_object(catalog.database_path(db.name) / ".database.json", ("attached",))["attached"]
