"""IoTDB's statements on the warehouse: databases, series, points, queries and SELECT ... INTO.

Each handler takes the :class:`~airflow_stream_provider.warehouse.warehouse.Warehouse` and one
statement and returns a :class:`~airflow_stream_provider.warehouse.result.Result`; the tables they
show have IoTDB's columns (reference 004 and its manual): ``SHOW TIMESERIES`` gives ``timeseries |
alias | database | dataType | encoding | compression | tags | attributes | deadband | deadband
parameters``, ``SHOW DEVICES`` gives ``devices | isAligned``, a SELECT ... INTO gives ``source
column | target timeseries | written``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from airflow_stream_provider import model as m
from airflow_stream_provider.values import FIRST_MICROS, LAST_MICROS, instant
from airflow_stream_provider.warehouse import retention
from airflow_stream_provider.warehouse.catalog import WarehouseError
from airflow_stream_provider.warehouse.result import Result
from airflow_stream_provider.warehouse.series.expressions import now_micros, time_micros
from airflow_stream_provider.warehouse.series.query import QueryRunner, ShapedResult, TimeRange
from airflow_stream_provider.warehouse.series.shaping import DEVICE, TIME
from airflow_stream_provider.warehouse.series.store import SeriesStore, arrow_of, coerce_point, value_type

if TYPE_CHECKING:
    from airflow_stream_provider.warehouse.warehouse import Warehouse

_PLACEHOLDER = re.compile(r"\$\{(\d+)\}")


def _result(stmt: m.Statement, message: str, table: pa.Table | None = None, rows: int = 0) -> Result:
    return Result(stmt, message, table=table, rows=rows)


def _plural(count: int, word: str) -> str:
    return f"{count} {word}{'' if count == 1 or word.endswith('s') else 's'}"


def store_of(warehouse: Warehouse) -> SeriesStore:
    return SeriesStore(warehouse.catalog)


# --- databases and series ------------------------------------------------------------------------


def create_database(warehouse: Warehouse, stmt: m.CreateSeriesDatabase) -> Result:
    db = store_of(warehouse).create_database(stmt.path)
    return _result(stmt, f"created database {stmt.path} (warehouse database {db.name})")


def attach_devices(warehouse: Warehouse, stmt: m.AttachDevices) -> Result:
    path = stmt.path
    location = path if path.startswith("s3://") else str(Path(path).expanduser().resolve())
    catalog = warehouse.catalog
    if catalog.store.contains(location) or (not location.startswith("s3://") and (
            catalog.root.resolve() == Path(location) or catalog.root.resolve() in Path(location).parents)):
        raise WarehouseError(f"{location} is inside the warehouse: its tables are read by name, not attached")
    db = store_of(warehouse).attach_database(stmt, location)
    devices = len(store_of(warehouse).registry(db).devices)
    return _result(stmt, f"attached {location} as {_plural(devices, 'device')} under {stmt.prefix} "
                         f"({_plural(len(stmt.measurements), 'measurement')}, read-only)")


def drop_databases(warehouse: Warehouse, stmt: m.DropSeriesDatabases) -> Result:
    store = store_of(warehouse)
    attached = {str(d.path): d.table for d in store.databases() if d.attached}
    dropped = store.drop_databases(stmt.patterns)
    if not dropped:
        raise WarehouseError(f"no database matches {', '.join(map(str, stmt.patterns))}")
    said = [f"{p} (detached: the Delta table at {attached[str(p)]} is left as it is)" if str(p) in attached
            else str(p) for p in dropped]
    return _result(stmt, f"deleted {_plural(len(dropped), 'database')}: {', '.join(said)}")


def show_databases(warehouse: Warehouse, stmt: m.ShowSeriesDatabases) -> Result:
    databases = [d for d in store_of(warehouse).databases() if stmt.pattern is None or stmt.pattern.matches(d.path)]
    table = pa.table({
        "database": pa.array([str(d.path) for d in databases], pa.string()),
        "ttl": pa.array([None] * len(databases), pa.int64()),
        "schema_replication_factor": pa.array([1] * len(databases), pa.int32()),
        "data_replication_factor": pa.array([1] * len(databases), pa.int32()),
        "time_partition_interval": pa.array([604_800_000] * len(databases), pa.int64()),
    })
    return _result(stmt, _plural(len(databases), "database"), table)


def create_timeseries(warehouse: Warehouse, stmt: m.CreateTimeseries) -> Result:
    created = store_of(warehouse).create_series(stmt.series, stmt.aligned)
    return _result(stmt, f"created {_plural(len(created), 'series')}: {', '.join(str(s.path) for s in created)}")


def drop_timeseries(warehouse: Warehouse, stmt: m.DropTimeseries) -> Result:
    dropped = store_of(warehouse).drop_series(stmt.patterns)
    return _result(stmt, f"deleted {_plural(len(dropped), 'series')}: {', '.join(str(s.path) for s in dropped)}")


def show_timeseries(warehouse: Warehouse, stmt: m.ShowTimeseries) -> Result:
    pattern = stmt.pattern or m.SeriesPath(("root", "**"))
    series = store_of(warehouse).expand([pattern])
    table = pa.table({
        "timeseries": pa.array([str(s.path) for s in series], pa.string()),
        "alias": pa.array([None] * len(series), pa.string()),
        "database": pa.array([str(s.database.path) for s in series], pa.string()),
        "dataType": pa.array([s.type.value for s in series], pa.string()),
        "encoding": pa.array([s.encoding for s in series], pa.string()),
        "compression": pa.array([s.compression for s in series], pa.string()),
        "tags": pa.array([None] * len(series), pa.string()),
        "attributes": pa.array([None] * len(series), pa.string()),
        "deadband": pa.array([None] * len(series), pa.string()),
        "deadband parameters": pa.array([None] * len(series), pa.string()),
    })
    return _result(stmt, _plural(len(series), "series"), table)


def show_devices(warehouse: Warehouse, stmt: m.ShowDevices) -> Result:
    pattern = stmt.pattern or m.SeriesPath(("root", "**"))
    devices = store_of(warehouse).devices(pattern)
    table = pa.table({"devices": pa.array([str(d) for _, d, _ in devices], pa.string()),
                      "isAligned": pa.array([str(a).lower() for _, _, a in devices], pa.string())})
    return _result(stmt, _plural(len(devices), "device"), table)


# --- points --------------------------------------------------------------------------------------


def insert(warehouse: Warehouse, stmt: m.InsertPoints) -> Result:
    """INSERT: the values checked against their series' types (a new series takes its first
    value's), then one column-wise commit; a NULL stores no point."""
    store = store_of(warehouse)
    now = datetime.now(UTC)
    db = store.database_of(stmt.device)
    # a measurement has one type in a database: a new series of a known measurement takes it
    known = {name: m.SeriesType(c["type"]) for name, c in store.registry(db).columns.items()} if db else {}
    columns: dict[str, m.SeriesType] = {}
    for i, name in enumerate(stmt.measurements):
        if name in known:
            columns[name] = known[name]
            continue
        first = next((values[i] for _, values in stmt.rows if values[i] is not None), None)
        if first is not None:
            columns[name] = value_type(first)
    times = pa.array([_row_time(t, now) for t, _ in stmt.rows], pa.timestamp("us", tz="UTC"))
    arrays = {}
    for i, name in enumerate(stmt.measurements):
        if name not in columns:
            continue  # every value NULL: no point, no series
        label = str(stmt.device.child(name))
        arrays[name] = pa.array([coerce_point(values[i], columns[name], label) for _, values in stmt.rows],
                                arrow_of(columns[name]))
    written = store.write_points([(stmt.device, times, arrays)], aligned=stmt.aligned, per_row=True) if arrays else 0
    return _result(stmt, f"{_plural(written, 'row')} written to {stmt.device}", rows=written)


def _row_time(value: int | m.TimePoint | None, now: datetime) -> datetime:
    if value is None:
        return now
    if isinstance(value, m.TimePoint):
        return value.resolve(now)
    return instant(value * 1000)  # PRECISION: an epoch number is milliseconds


def delete(warehouse: Warehouse, stmt: m.DeletePoints) -> Result:
    """DELETE FROM pattern [WHERE time ...]: the points of the matching series in the range."""
    store = store_of(warehouse)
    series = store.expand(stmt.patterns)
    start, end = _delete_range(stmt.where, now_micros())
    if start is not None and end is not None and start > end:
        return _result(stmt, "0 points deleted (the time range is empty)")
    deleted = store.delete_points(series, _at(start), _at(end)) if series else 0
    return _result(stmt, f"{_plural(deleted, 'point')} deleted from {_plural(len(series), 'series')}", rows=deleted)


def _at(micros: int | None) -> datetime | None:
    """The instant ``micros`` after the epoch, held to the times a series can hold: a bound past
    them (``time <= 99999999999999999999``) is the end of those times."""
    if micros is None:
        return None
    return instant(min(max(micros, FIRST_MICROS), LAST_MICROS))


def _delete_range(where: m.SeriesExpr | None, now: int) -> tuple[int | None, int | None]:
    """``[start, end]`` (microseconds, inclusive) of DELETE's time conditions."""
    start: int | None = None
    end: int | None = None
    if where is None:
        return start, end
    parts = []
    stack = [where]
    while stack:
        node = stack.pop()
        if isinstance(node, m.Binary) and node.op == "AND":
            stack.extend([node.left, node.right])
        else:
            parts.append(node)
    for part in parts:
        low, high = _bounds(part, now)
        start = low if start is None else max(start, low) if low is not None else start
        end = high if end is None else min(end, high) if high is not None else end
    return start, end


def _bounds(node: m.SeriesExpr, now: int) -> tuple[int | None, int | None]:
    if isinstance(node, m.Between) and isinstance(node.operand, m.TimeRef) and not node.negated:
        return _time(node.low, now), _time(node.high, now)
    if not isinstance(node, m.Binary) or node.op not in ("=", "<", "<=", ">", ">="):
        raise WarehouseError("DELETE ... WHERE compares time with =, <, <=, >, >= or BETWEEN, joined by AND")
    op, left, right = node.op, node.left, node.right
    if isinstance(right, m.TimeRef):
        op = {"<": ">", "<=": ">=", ">": "<", ">=": "<=", "=": "="}[op]
        left, right = right, left
    if not isinstance(left, m.TimeRef):
        raise WarehouseError("DELETE ... WHERE compares time only")
    value = _time(right, now)
    return {"=": (value, value), "<": (None, value - 1), "<=": (None, value), ">": (value + 1, None),
            ">=": (value, None)}[op]


def _time(node: m.SeriesExpr, now: int) -> int:
    if not isinstance(node, m.Literal):
        raise WarehouseError("a time in DELETE ... WHERE is a constant: a timestamp, an epoch number or now()")
    return time_micros(node.value, now)


# --- queries -------------------------------------------------------------------------------------


def select(warehouse: Warehouse, stmt: m.QuerySeries) -> Result:
    query = stmt.query
    store = store_of(warehouse)
    result = QueryRunner(store, warehouse.spark, query).run()
    if not query.into:
        return _result(stmt, _plural(result.table.num_rows, "row"), result.table)
    summary = write_into(store, query, result)
    written = sum(summary["written"].to_pylist())
    return _result(stmt, f"{_plural(written, 'point')} written", summary, rows=written)


def set_ttl(warehouse: Warehouse, stmt: m.SetTtl) -> Result:
    """SET TTL / UNSET TTL: the retention of the databases at the path (database-level TTL)."""
    store = SeriesStore(warehouse.catalog)
    prefix = stmt.path.nodes[:-1] if stmt.path.nodes[-1] == "**" else None
    hits = [db for db in store.databases()
            if db.path == stmt.path or (prefix is not None and db.path.nodes[:len(prefix)] == prefix)]
    if not hits:
        raise WarehouseError(f"{stmt.kind if stmt.ttl_ms is not None else 'UNSET TTL'}: no database at {stmt.path}; "
                             "TTL is set on databases (root.ln) or on every database under a prefix (root.sgcc.**)")
    for db in hits:
        retention.set_keep(warehouse.catalog, db.name, stmt.ttl_ms * 1000 if stmt.ttl_ms is not None else None)
    names = ", ".join(str(db.path) for db in hits)
    if stmt.ttl_ms is None:
        return Result(stmt, f"TTL unset for {names}: every point is kept")
    return Result(stmt, f"TTL of {names}: {stmt.ttl_ms} ms; the retention run deletes older points")


def run_query(store: SeriesStore, spark, query: m.SeriesQuery, start: int, end: int, now: int) -> pa.Table:
    """One execution of a continuous query's body over ``[start, end)`` (microseconds), its results
    written into its INTO series; the summary table."""
    result = QueryRunner(store, spark, query, range_=TimeRange(start, end), now=now).run()
    return write_into(store, query, result)


class PointWriter(Protocol):
    """Where SELECT ... INTO puts its points: the series store, or what keeps them (VERIFY CQ)."""

    def write_points(self, batches: Sequence[tuple[m.SeriesPath, pa.Array, dict[str, pa.Array]]],
                     aligned: bool = False, *, per_row: bool = False) -> int: ...


def write_into(store: PointWriter, query: m.SeriesQuery, result: ShapedResult) -> pa.Table:
    """SELECT ... INTO: each result column into its target series, created when missing."""
    table = result.table
    times = table[TIME].combine_chunks() if TIME in table.column_names else \
        pa.array([0] * table.num_rows, pa.int64()).cast(pa.timestamp("us", tz="UTC"))
    if result.by_device:
        return _into_by_device(store, query, result, times)
    return _into_by_time(store, query, result, times)


def _into_by_time(store: PointWriter, query: m.SeriesQuery, result: ShapedResult, times: pa.Array) -> pa.Table:
    table = result.table
    values = [c for c in table.column_names if c != TIME]
    targets = [(item.device, name) for item in query.into for name in item.measurements]
    if len(targets) != len(values):
        raise WarehouseError(f"select into: the number of source columns ({len(values)}) and the number of target "
                             f"paths ({len(targets)}) should be the same")
    batches: dict[m.SeriesPath, dict[str, pa.Array]] = {}
    rows = []
    for header, column, (device, name) in zip(values, result.columns, targets, strict=True):
        source = column.series[0] if len(column.series) == 1 and isinstance(query.items[column.item].expr, m.Ref) \
            else None
        target_device = _substitute_device(device, source.path if source else None, header)
        target_name = _substitute_measurement(name, source.path if source else None, header)
        batch = batches.setdefault(target_device, {})
        if target_name in batch:
            raise WarehouseError("select into: target paths in into clause should be different")
        batch[target_name] = table[header].combine_chunks()
        rows.append((header, str(target_device.child(target_name)), table[header].null_count))
    store.write_points([(device, times, arrays) for device, arrays in batches.items()])
    return pa.table({"source column": [r[0] for r in rows], "target timeseries": [r[1] for r in rows],
                     "written": pa.array([table.num_rows - r[2] for r in rows], pa.int64())})


def _into_by_device(store: PointWriter, query: m.SeriesQuery, result: ShapedResult, times: pa.Array) -> pa.Table:
    table = result.table
    headers = result.item_names
    runs = _device_runs(table[DEVICE].combine_chunks())  # a device's rows are together, devices in order
    # the INTO items pair with the devices the query reads, as IoTDB pairs them when it analyses the
    # statement: a device without rows in the range (a CQ execution's) writes nothing
    order = result.devices
    if len(query.into) == 1 and _has_device_placeholder(query.into[0].device):
        items = [query.into[0]] * len(order)
    elif len(query.into) != len(order):
        raise WarehouseError(f"select into: the number of source devices ({len(order)}) and the number of target "
                             f"devices ({len(query.into)}) should be the same")
    else:
        items = list(query.into)
    for item in items:
        if len(item.measurements) != len(headers):
            raise WarehouseError(f"select into: the number of source columns ({len(headers)}) and the number of "
                                 f"target paths ({len(item.measurements)}) should be the same")
    item_of = dict(zip(order, items, strict=True))
    batches = []
    rows = []
    for source, start, stop in runs:
        item = item_of[source]
        source_path = m.SeriesPath(tuple(_split(source)))
        device = _substitute_device(item.device, source_path, source)
        rows_of_device = table.slice(start, stop - start)
        arrays = {}
        for header, name, select_item in zip(headers, item.measurements, query.items, strict=False):
            raw = isinstance(select_item.expr, m.Ref)
            target = _substitute_measurement(name, m.SeriesPath((header,)) if raw else None, header)
            arrays[target] = rows_of_device[header].combine_chunks()
            rows.append((source, header, str(device.child(target)), len(arrays[target]) - arrays[target].null_count))
        batches.append((device, times.slice(start, stop - start), arrays))
    store.write_points(batches, aligned=any(i.aligned for i in query.into))
    return pa.table({"source device": [r[0] for r in rows], "source column": [r[1] for r in rows],
                     "target timeseries": [r[2] for r in rows], "written": pa.array([r[3] for r in rows], pa.int64())})


def _device_runs(devices: pa.Array) -> list[tuple[str, int, int]]:
    """(device, start, stop) of each run of equal values in ``devices``; each device once."""
    if len(devices) == 0:
        return []
    changes = pc.not_equal(devices.slice(1), devices.slice(0, len(devices) - 1)).to_numpy(zero_copy_only=False)
    starts = [0, *(np.flatnonzero(changes) + 1).tolist()]
    stops = [*starts[1:], len(devices)]
    runs = [(devices[start].as_py(), start, stop) for start, stop in zip(starts, stops, strict=True)]
    if len({name for name, _, _ in runs}) != len(runs):
        raise AssertionError("ALIGN BY DEVICE rows come device by device")
    return runs


def _split(path: str) -> list[str]:
    """A full path's nodes (device paths written by this project hold no backquoted dots)."""
    return path.split(".")


def _has_device_placeholder(device: m.SeriesPath) -> bool:
    return any(n == "::" or _PLACEHOLDER.search(n) for n in device.nodes)


def _substitute_device(device: m.SeriesPath, source: m.SeriesPath | None, label: str) -> m.SeriesPath:
    """``::`` copies the source's nodes from this level on; ``${i}`` copies source node ``i``
    (root is 0). ``source`` is the source device (ALIGN BY DEVICE) or series."""
    if not _has_device_placeholder(device):
        return device
    if source is None:
        raise WarehouseError(f"select into: the correspondence between the placeholder and the raw time series "
                             f"could not be established ({label}): placeholders can only be used with raw series")
    nodes: list[str] = []
    for i, node in enumerate(device.nodes):
        if node == "::":
            if i != len(device.nodes) - 1:
                raise WarehouseError("select into: :: goes last in a target device")
            nodes.extend(source.nodes[i:])
        else:
            nodes.append(_PLACEHOLDER.sub(lambda match: _node(source, int(match.group(1))), node))
    return m.SeriesPath(tuple(nodes))


def _substitute_measurement(name: str, path: m.SeriesPath | None, label: str) -> str:
    """``::`` copies the source series' measurement; ``${i}`` its node ``i``."""
    if name == "::":
        if path is None:
            raise WarehouseError(f"select into: :: as a measurement copies a raw series' name; {label} is computed")
        return path.last
    if _PLACEHOLDER.search(name):
        if path is None:
            raise WarehouseError(f"select into: placeholders can only be used in raw time series data queries "
                                 f"({label})")
        return _PLACEHOLDER.sub(lambda match: _node(path, int(match.group(1))), name)
    return name


def _node(path: m.SeriesPath, index: int) -> str:
    if not 0 <= index < len(path.nodes):
        raise WarehouseError(f"select into: ${{{index}}} is beyond the {len(path.nodes)} nodes of {path}")
    return path.nodes[index]


__all__ = ["create_database", "create_timeseries", "delete", "drop_databases", "drop_timeseries", "insert",
           "run_query", "select", "show_databases", "show_devices", "show_timeseries"]
