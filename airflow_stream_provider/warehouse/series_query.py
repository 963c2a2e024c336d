"""IoTDB queries on the devices tables: series patterns expanded against the registry, one Spark
SQL statement, then the result shaped as IoTDB shows it (reference 004; its query pages).

How a query runs:

- **Expansion.** Each series an expression names is a suffix of every FROM prefix (or a full
  path); it expands to the existing series that match, in creation order. An expression naming
  several series expands to every combination (IoTDB's Cartesian product), the first series
  outermost. ``GROUP BY LEVEL`` then merges the series that agree on the kept levels.
- **ALIGN BY DEVICE** evaluates the select list on each device's rows directly (one row per time,
  or per window, and device). **ALIGN BY TIME** computes each series' values (or aggregates) per
  time and device, pivots them into one column per series, then evaluates the expressions.
- **Windows** of ``GROUP BY ([start, end), interval[, step])`` are ``[start + k * step, + interval)``
  inside the range, each labelled by its start (by its end for ``((start, end], ...)``); every
  window is a row, an empty one with NULLs (and count 0). A continuous query's execution supplies
  the range.
- **FILL** (PREVIOUS, LINEAR, a constant of a fitting type), ``ORDER BY TIME DESC``, LIMIT/OFFSET and
  SLIMIT/SOFFSET apply to the shaped result; arithmetic and math functions give DOUBLE, as in IoTDB.

Deliberate limits (each a clear error): a WHERE or HAVING on values reads the series of one device
at a time (ALIGN BY DEVICE, or a query over one device's series), and under ALIGN BY TIME a WHERE
on values names one series per condition in a raw query.
"""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime

import numpy as np
import pandas as pd
import pyarrow as pa
from sqlglot import exp

from airflow_stream_provider import model as m
from airflow_stream_provider.model.series import walk
from airflow_stream_provider.sql.iotdb.validate import SCALAR_FUNCTIONS
from airflow_stream_provider.warehouse.catalog import WarehouseError
from airflow_stream_provider.warehouse.series import DEVICE_TAG, TBNAME, TS, Series, SeriesDatabase, SeriesStore

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
TIME = "Time"
DEVICE = "Device"
_ARITHMETIC = {"+", "-", "*", "/", "%"}
_SQL_OPS = {"=": "=", "!=": "<>", "<": "<", "<=": "<=", ">": ">", ">=": ">=", "AND": "AND", "OR": "OR",
            "+": "+", "-": "-", "*": "*", "/": "/", "%": "%"}


def _micros(at: datetime) -> int:
    delta = at - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def _lit(value: object) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return repr(value) if math.isfinite(value) else f"CAST('{value}' AS DOUBLE)"
    return exp.Literal.string(str(value)).sql(dialect="spark")


def _col(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def _table(path: object) -> str:
    return "delta.`" + str(path).replace("`", "``") + "`"


@dataclass(frozen=True)
class TimeRange:
    """``[start, end)`` in epoch microseconds; None for an open side."""

    start: int | None = None
    end: int | None = None


@dataclass
class Column:
    """One column of an ALIGN BY TIME result: its header, its SQL over the pivot, and the series
    it was expanded from (for INTO's placeholders)."""

    name: str
    sql: str
    series: tuple[Series, ...]
    item: int


@dataclass
class Result:
    """A shaped result: the Arrow table, and for each value column the item it came from and its series."""

    table: pa.Table
    columns: list[Column] = field(default_factory=list)
    by_device: bool = False
    #: ALIGN BY DEVICE: item -> the header of its column
    item_names: list[str] = field(default_factory=list)


def now_micros() -> int:
    return _micros(datetime.now(UTC))


def time_micros(value: object, now: int) -> int:
    """A time constant in epoch microseconds: a time point, or an epoch number in milliseconds."""
    if isinstance(value, m.TimePoint):
        if value.at is not None:
            return _micros(value.at)
        return now + (value.now_offset_micros or 0)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise WarehouseError(f"{value!r} is not a time")
    return int(value * 1000)


class QueryRunner:
    """Runs one IoTDB query against the series store with a Spark session."""

    def __init__(self, store: SeriesStore, spark, query: m.SeriesQuery, *, range_: TimeRange | None = None,
                 now: int | None = None) -> None:
        """:param range_: a continuous query execution's ``[start, end)``, ANDed with the query's own."""
        self.store = store
        self.spark = spark
        self.query = query
        self.now = now if now is not None else now_micros()
        self.forced = range_
        self.all_series = self._touched()

    # --- expansion -------------------------------------------------------------------------------

    def _touched(self) -> list[Series]:
        """Every series the query's patterns could name (full patterns: FROM prefix + suffix)."""
        patterns = []
        for ref in self._refs():
            patterns.extend(self._patterns(ref))
        return self.store.expand(patterns)

    def _refs(self) -> list[m.Ref]:
        nodes = [n for item in self.query.items for n in walk(item.expr)]
        for clause in (self.query.where, self.query.having):
            if clause is not None:
                nodes.extend(walk(clause))
        return [n for n in nodes if isinstance(n, m.Ref)]

    def _patterns(self, ref: m.Ref) -> list[m.SeriesPath]:
        if ref.path.absolute:
            return [ref.path]
        return [source.child(*ref.path.nodes) for source in self.query.sources]

    def matches(self, ref: m.Ref) -> list[Series]:
        """The series ``ref`` names: for each FROM prefix in order, the matches in creation order."""
        out: list[Series] = []
        for pattern in self._patterns(ref):
            out.extend(s for s in self.all_series if pattern.matches(s.path) and s not in out)
        return out

    # --- time ------------------------------------------------------------------------------------

    def time_range(self) -> TimeRange:
        """The query's time range: its GROUP BY range, its WHERE's time bounds, a CQ execution's range."""
        start: int | None = None
        end: int | None = None
        group = self.query.group_by
        if group is not None and group.start is not None and group.end is not None:
            # for ((start, end], ...) these bound the time less 1 microsecond, which is then [start, end)
            start, end = time_micros(group.start, self.now), time_micros(group.end, self.now)
        if self.forced is not None:
            start = _max(start, self.forced.start)
            end = _min(end, self.forced.end)
        return TimeRange(start, end)

    # --- running ---------------------------------------------------------------------------------

    def run(self) -> Result:
        query = self.query
        if query.align_by_device:
            if query.levels:
                raise WarehouseError("GROUP BY LEVEL does not go with ALIGN BY DEVICE")
            return self._by_device()
        return self._by_time()

    # --- ALIGN BY DEVICE ---------------------------------------------------------------------------

    def _device_items(self) -> list[tuple[str, m.SeriesExpr]]:
        """(header, expression) of each select item, ``*`` expanded to the measurements of the devices."""
        out: list[tuple[str, m.SeriesExpr]] = []
        for item in self.query.items:
            refs = [n for n in walk(item.expr) if isinstance(n, m.Ref)]
            for ref in refs:
                if len(ref.path.nodes) != 1:
                    raise WarehouseError(f"under ALIGN BY DEVICE an expression names measurements of the devices "
                                         f"in FROM, as temperature; found {ref.path}")
            wild = [r for r in refs if "*" in r.path.nodes[0]]
            if not wild:
                out.append((item.alias or _show(item.expr, {}), item.expr))
                continue
            if len(refs) != 1:
                raise WarehouseError(f"a wildcard measurement goes alone in an expression: {_show(item.expr, {})}")
            names: list[str] = []
            pattern = m.SeriesPath(wild[0].path.nodes)
            for s in self.all_series:
                if pattern.matches((s.measurement,)) and s.measurement not in names:
                    names.append(s.measurement)
            for name in names:
                expr = _replace_ref(item.expr, m.Ref(m.SeriesPath((name,))))
                out.append((_show(expr, {}), expr))
        return out

    def _by_device(self) -> Result:
        query = self.query
        items = self._device_items()
        measurements = {n.path.nodes[0] for _, e in items for n in walk(e) if isinstance(n, m.Ref)}
        found: dict[tuple[SeriesDatabase, m.SeriesPath], None] = {}  # in creation order
        for s in self.all_series:
            if s.measurement in measurements and (s.database, s.device) not in found and \
                    any(src.child(s.measurement).matches(s.path) or src.matches(s.device) for src in query.sources):
                found[(s.database, s.device)] = None
        devices = list(found)
        headers = [h for h, _ in items]
        if not devices:
            return Result(_empty_by_device(headers, query.aggregated and query.group_by is None),
                          by_device=True, item_names=headers)
        window = self._windows()
        parts = []
        for db in dict.fromkeys(d for d, _ in devices):
            names = [str(dev) for d, dev in devices if d == db]
            parts.append(self._device_sql(db, names, items, window))
        frame = self.spark.sql(" UNION ALL ".join(f"({p})" for p in parts)).toArrow()
        return self._shape_by_device(frame, headers, window, [str(dev) for _, dev in devices])

    def _device_sql(self, db: SeriesDatabase, devices: list[str], items: list[tuple[str, m.SeriesExpr]],
                    window: _Windows | None) -> str:
        query = self.query
        columns = self._columns_of(db)
        source = self._rows_sql(db, devices, window)
        aggregated = query.aggregated
        select = []
        for i, (_, expr) in enumerate(items):
            select.append(f"{_sql(expr, lambda ref: _measurement_column(columns, ref), aggregate=aggregated)} AS "
                          f"{_col(f'v{i}')}")
        where = ""
        if query.where is not None:
            value_where = _value_part(query.where)
            if value_where is not None:
                where = " WHERE " + _sql(value_where, lambda ref: _measurement_column(columns, ref))
        if not aggregated:
            return f"SELECT __key, {TBNAME}, {', '.join(select)} FROM ({source}){where}"
        having = ""
        if query.having is not None:
            having = " HAVING " + _sql(query.having, lambda ref: _measurement_column(columns, ref), aggregate=True)
        return (f"SELECT __key, {TBNAME}, {', '.join(select)} FROM ({source}){where} "
                f"GROUP BY __key, {TBNAME}{having}")

    def _shape_by_device(self, frame: pa.Table, headers: list[str], window: _Windows | None,
                         devices: list[str]) -> Result:
        query = self.query
        df = frame.to_pandas()
        df["__order"] = df[TBNAME].map({d: i for i, d in enumerate(devices)})  # devices in creation order
        df = df.sort_values(["__order", "__key"], kind="stable")  # FILL reads each device's rows in time order
        values = [f"v{i}" for i in range(len(headers))]
        if query.aggregated and window is not None:
            df = _complete_windows(df, window, values, self._count_items(), devices=devices)
        if not query.aggregated:
            df = df[df[values].notna().any(axis=1)] if values else df
        if query.fill is not None:
            df = _fill(df, values, query.fill, by=TBNAME)
        df = _paginate(df, query)
        out = {}
        if not (query.aggregated and window is None):
            out[TIME] = _times(df["__key"], window)
        out[DEVICE] = pa.array(df[TBNAME].tolist(), pa.string())
        for header, column in zip(headers, values, strict=True):
            out[header] = _arrow(df[column], frame.schema.field(column).type if column in frame.column_names else None)
        table = pa.table(out)
        table = _slimit(table, query, fixed=2 if TIME in out else 1)
        return Result(table, by_device=True, item_names=headers)

    def _count_items(self) -> list[int]:
        return [i for i, item in enumerate(self.query.items) if _is_count(item.expr)]

    # --- rows and windows ------------------------------------------------------------------------

    def _windows(self) -> _Windows | None:
        group = self.query.group_by
        if group is None:
            return None
        span = self.time_range()
        if span.start is None or span.end is None:
            raise WarehouseError("GROUP BY needs a time range: GROUP BY ([start, end), interval)")
        return _Windows(span.start, span.end, group.interval.micros, group.sliding.micros, group.left_open)

    def _rows_sql(self, db: SeriesDatabase, devices: list[str], window: _Windows | None) -> str:
        """The rows of ``devices`` of ``db`` in the query's time range, with ``__key``: the time
        (micros) for a raw query, the window start for GROUP BY, 0 for an aggregate of all rows."""
        span = self.time_range()
        conditions = [f"{TBNAME} IN ({', '.join(_lit(d) for d in devices)})"]
        shift = 1 if window is not None and window.left_open else 0
        micros = f"(unix_micros({TS}) - {shift})" if shift else f"unix_micros({TS})"
        if span.start is not None:
            conditions.append(f"{micros} >= {span.start}")
        if span.end is not None:
            conditions.append(f"{micros} < {span.end}")
        if self.query.where is not None:
            time_where = _time_part(self.query.where, self.now)
            if time_where is not None:
                conditions.append(time_where)
        base = f"SELECT *, {micros} AS __t FROM {_table(db.table)} WHERE {' AND '.join(conditions)}"
        if window is None:
            key = "__t" if not self.query.aggregated else "0"
            return f"SELECT *, {key} AS __key FROM ({base})"
        start, step, size = window.start, window.step, window.interval
        if step >= size:
            k = f"floor((__t - {start}) / {step})"
            return (f"SELECT * FROM (SELECT *, {start} + CAST({k} AS BIGINT) * {step} AS __key FROM ({base})) "
                    f"WHERE __t - __key < {size}")
        low = f"CAST(greatest(0, ceil((__t - {start} - {size} + 1) / {step})) AS BIGINT)"
        high = f"CAST(floor((__t - {start}) / {step}) AS BIGINT)"
        return (f"SELECT * FROM (SELECT *, {start} + __k * {step} AS __key FROM "
                f"(SELECT *, explode(sequence({low}, {high})) AS __k FROM ({base}))) WHERE __key < {window.end}")

    def _columns_of(self, db: SeriesDatabase) -> dict[str, tuple[str, m.SeriesType]]:
        registry = self.store.registry(db)
        return {name: (c["column"], m.SeriesType(c["type"])) for name, c in registry.columns.items()}

    # --- ALIGN BY TIME ---------------------------------------------------------------------------

    def _by_time(self) -> Result:
        query = self.query
        columns = self._expand_columns()
        window = self._windows()
        if not columns:
            return Result(_empty_by_time([], with_time=not (query.aggregated and window is None)))
        one_device = len({(s.database, s.device) for c in columns for s in c.series}) == 1
        value_where = _value_part(query.where) if query.where is not None else None
        if query.having is not None and not one_device:
            raise WarehouseError("HAVING reads the series of one device here: use ALIGN BY DEVICE, or FROM one device")
        if value_where is not None and not one_device and query.aggregated:
            raise WarehouseError("a WHERE on values of an aggregated query reads the series of one device here: "
                                 "use ALIGN BY DEVICE, or FROM one device")
        sql = self._pivot_sql(columns, window, value_where, one_device)
        frame = self.spark.sql(sql).toArrow()
        return self._shape_by_time(frame, columns, window)

    def _expand_columns(self) -> list[Column]:
        query = self.query
        out: list[Column] = []
        for index, item in enumerate(query.items):
            refs = list(dict.fromkeys(n for n in walk(item.expr) if isinstance(n, m.Ref)))
            choices = [self.matches(r) for r in refs]
            if query.levels:
                out.extend(self._level_columns(index, item, refs, choices))
                continue
            combos = list(itertools.product(*choices)) if refs else [()]
            if item.alias and len(combos) > 1:
                raise WarehouseError(f"the alias {item.alias} names {len(combos)} columns: an alias names one series")
            for combo in combos:
                binding = dict(zip(refs, combo, strict=True))
                name = item.alias or _show(item.expr, {r: str(s.path) for r, s in binding.items()})
                out.append(Column(name, "", tuple(combo), index))
        return out

    def _level_columns(self, index: int, item: m.SelectItem, refs: list[m.Ref],
                       choices: list[list[Series]]) -> list[Column]:
        expr = item.expr
        if not (isinstance(expr, m.Call) and expr.name in m.AGGREGATES and len(refs) == 1 and expr.args == (refs[0],)):
            raise WarehouseError("GROUP BY LEVEL aggregates one series per item, as count(status)")
        groups: dict[str, list[Series]] = {}
        for s in choices[0]:
            nodes = s.path.nodes
            kept = tuple(n if (i == 0 or i in self.query.levels or i == len(nodes) - 1) else "*"
                         for i, n in enumerate(nodes))
            groups.setdefault(".".join(kept), []).append(s)
        if expr.name in ("sum", "avg", "max_value", "min_value", "extreme"):
            for key, members in groups.items():
                if len({s.type for s in members}) > 1:
                    raise WarehouseError(f"{expr.name} over {key} merges series of different types "
                                         f"({', '.join(sorted({s.type.value for s in members}))})")
        return [Column(item.alias or f"{expr.name}({key})", "", tuple(members), index)
                for key, members in groups.items()]

    def _pivot_sql(self, columns: list[Column], window: _Windows | None, value_where: m.SeriesExpr | None,
                   one_device: bool) -> str:
        """One statement: the rows of every database involved, a value per (time or window, series),
        then each column's expression."""
        query = self.query
        series = list(dict.fromkeys(s for c in columns for s in c.series))
        slot = {s: f"s{i}" for i, s in enumerate(series)}
        by_db: dict[SeriesDatabase, list[Series]] = {}
        for s in series:
            by_db.setdefault(s.database, []).append(s)
        where_series: list[Series] = []
        if value_where is not None and not one_device:
            for ref in (n for n in walk(value_where) if isinstance(n, m.Ref)):
                found = self.matches(ref)
                if len(found) != 1:
                    raise WarehouseError(f"under ALIGN BY TIME a WHERE condition names one series; {ref.path} "
                                         f"names {len(found)}: use ALIGN BY DEVICE")
                if found[0] not in slot:
                    slot[found[0]] = f"s{len(slot)}"
                    by_db.setdefault(found[0].database, []).append(found[0])
                where_series.append(found[0])
        unions = []
        for db, members in by_db.items():
            devices = sorted({str(s.device) for s in members})
            rows = self._rows_sql(db, devices, window)
            if value_where is not None and one_device:
                condition = _sql(value_where, functools.partial(_measurement_column, self._columns_of(db)))
                rows = f"SELECT * FROM ({rows}) WHERE {condition}"
            picks = ", ".join(f"CASE WHEN {TBNAME} = {_lit(str(s.device))} THEN {_col(s.column)} END AS "
                              f"{_col(slot[s])}" if s in members else f"NULL AS {_col(slot[s])}" for s in slot)
            unions.append(f"SELECT __key, {TS}, {picks} FROM ({rows})")
        union = " UNION ALL ".join(f"({u})" for u in unions)
        if not query.aggregated:
            pivot = ", ".join(f"max({_col(v)}) AS {_col(v)}" for v in slot.values())
            stage = f"SELECT __key, {pivot} FROM ({union}) GROUP BY __key"
            exprs = []
            for i, column in enumerate(columns):
                refs = list(dict.fromkeys(n for n in walk(query.items[column.item].expr) if isinstance(n, m.Ref)))
                binding = dict(zip(refs, column.series, strict=True))
                exprs.append(f"{_sql(query.items[column.item].expr, lambda r, b=binding: _col(slot[b[r]]))} AS "
                             f"{_col(f'c{i}')}")
            where = ""
            if value_where is not None and not one_device:
                iterator = iter(where_series)
                where = " WHERE " + _sql(value_where, lambda r: _col(slot[next(iterator)]))
            return f"SELECT __key, {', '.join(exprs)} FROM ({stage}){where}"
        # aggregated: every aggregate of every series, then the expressions over them
        aggregates: dict[tuple[str, Series | tuple[Series, ...]], str] = {}
        exprs = []
        for i, column in enumerate(columns):
            item = query.items[column.item]
            if query.levels:
                call = item.expr
                assert isinstance(call, m.Call)
                merged: tuple[str, Series | tuple[Series, ...]] = (call.name, column.series)
                if merged not in aggregates:
                    aggregates[merged] = f"a{len(aggregates)}"
                exprs.append(f"{_col(aggregates[merged])} AS {_col(f'c{i}')}")
                continue
            refs = list(dict.fromkeys(n for n in walk(item.expr) if isinstance(n, m.Ref)))
            binding = dict(zip(refs, column.series, strict=True))

            def aggregate(call: m.Call, b=binding) -> str:
                ref = call.args[0]
                target = b[ref] if isinstance(ref, m.Ref) else None
                if target is None:
                    raise WarehouseError(f"{call.name} aggregates a series, as {call.name}(temperature)")
                key = (call.name, target)
                if key not in aggregates:
                    aggregates[key] = f"a{len(aggregates)}"
                return _col(aggregates[key])

            exprs.append(f"{_sql(item.expr, lambda r: 'NULL', aggregate=aggregate)} AS {_col(f'c{i}')}")
        parts = []
        for (name, target), alias in aggregates.items():
            read = target if isinstance(target, tuple) else (target,)
            values = [f"{_col(slot[s])}" for s in read]
            value = values[0] if len(values) == 1 else f"coalesce({', '.join(values)})"
            parts.append(f"{_aggregate_sql(name, value)} AS {_col(alias)}")
        # a row of the union is one device's: a level group's series (one per device) coalesce into one value
        stage = f"SELECT __key, {', '.join(parts)} FROM ({union}) GROUP BY __key"
        return f"SELECT __key, {', '.join(exprs)} FROM ({stage})"

    def _shape_by_time(self, frame: pa.Table, columns: list[Column], window: _Windows | None) -> Result:
        query = self.query
        values = [f"c{i}" for i in range(len(columns))]
        df = frame.to_pandas()
        counts = [i for i, c in enumerate(columns) if _is_count(query.items[c.item].expr)]
        if query.aggregated and window is not None:
            df = _complete_windows(df, window, values, counts)
        elif query.aggregated:
            if df.empty:
                df = pd.DataFrame({"__key": [0], **{v: [None] for v in values}})
            for i in counts:
                df[values[i]] = df[values[i]].fillna(0)
        else:
            df = df[df[values].notna().any(axis=1)] if values else df
            df = df.sort_values("__key")
        if query.fill is not None:
            df = _fill(df, values, query.fill)
        df = _paginate(df, query)
        out: dict[str, pa.Array] = {}
        with_time = not (query.aggregated and window is None)
        if with_time:
            out[TIME] = _times(df["__key"], window)
        names = _unique([c.name for c in columns])
        for name, column in zip(names, values, strict=True):
            out[name] = _arrow(df[column], frame.schema.field(column).type if column in frame.column_names else None)
        table = pa.table(out) if out else pa.table({})
        table = _slimit(table, query, fixed=1 if with_time else 0)
        kept = set(table.column_names)
        return Result(table, [c for c, n in zip(columns, names, strict=True) if n in kept])


def _is_count(expr: m.SeriesExpr) -> bool:
    """A count: 0, not NULL, for a window without rows."""
    return isinstance(expr, m.Call) and expr.name == "count"


# --- windows -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Windows:
    start: int
    end: int
    interval: int
    step: int
    left_open: bool

    def starts(self) -> np.ndarray:
        count = max(0, -(-(self.end - self.start) // self.step))
        return self.start + np.arange(count, dtype=np.int64) * self.step


def _complete_windows(df: pd.DataFrame, window: _Windows, values: list[str], counts: list[int],
                      devices: list[str] | None = None) -> pd.DataFrame:
    """Every window of the range a row (per device of ``devices``), an empty one NULL but its counts 0."""
    starts = window.starts()
    if devices is None:
        grid = pd.DataFrame({"__key": starts})
        merged = grid.merge(df, on="__key", how="left")
    else:
        grid = pd.DataFrame({TBNAME: np.repeat(devices, len(starts)), "__key": np.tile(starts, len(devices)),
                             "__order": np.repeat(np.arange(len(devices)), len(starts))})
        merged = grid.merge(df.drop(columns=[c for c in ("__order",) if c in df.columns]), on=[TBNAME, "__key"],
                            how="left")
    for i in counts:
        merged[values[i]] = merged[values[i]].fillna(0).astype("int64")
    return merged


def _times(keys: pd.Series, window: _Windows | None) -> pa.Array:
    """The Time column: a window's start, or for ``((start, end], ...)`` its end (the range's end
    for a window the range cuts short)."""
    micros = keys.to_numpy(dtype=np.int64)
    if window is not None and window.left_open:
        micros = np.minimum(micros + window.interval, window.end)
    return pa.array(micros, pa.int64()).cast(pa.timestamp("us", tz="UTC"))


# --- shaping -------------------------------------------------------------------------------------


def _fill(df: pd.DataFrame, values: list[str], fill: m.SeriesFill, by: str | None = None) -> pd.DataFrame:
    """FILL on the shaped rows, per device under ALIGN BY DEVICE."""
    df = df.copy()
    groups = [df] if by is None else [g for _, g in df.groupby(by, sort=False)]
    for group in groups:
        for column in values:
            series = group[column]
            if fill.method == "previous":
                filled = series.ffill()
            elif fill.method == "linear":
                if not pd.api.types.is_numeric_dtype(series) or pd.api.types.is_bool_dtype(series):
                    continue
                filled = series.astype("float64")
                inside = filled.ffill().notna() & filled.bfill().notna()
                interpolated = pd.Series(np.interp(group["__key"], group["__key"][filled.notna()],
                                                   filled[filled.notna()]) if filled.notna().any() else filled,
                                         index=group.index)
                filled = filled.where(filled.notna() | ~inside, interpolated)
            else:
                if not _fits(fill.value, series):
                    continue
                filled = series.where(series.notna(), fill.value)
            df.loc[group.index, column] = filled
    return df


def _fits(value: object, series: pd.Series) -> bool:
    """Whether a FILL constant fits a column (IoTDB: a boolean fills BOOLEAN, a number fills
    numbers, a string fills TEXT; an integer constant beyond INT32 does not fill INT32)."""
    if pd.api.types.is_bool_dtype(series):
        return isinstance(value, bool)
    if pd.api.types.is_numeric_dtype(series):
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return False
        if pd.api.types.is_integer_dtype(series) and not float(value).is_integer():
            return False
        return not (series.dtype == np.int32 and isinstance(value, int) and not -(2**31) <= value < 2**31)
    return True


def _paginate(df: pd.DataFrame, query: m.SeriesQuery) -> pd.DataFrame:
    if query.descending:
        sort = ["__order", "__key"] if "__order" in df.columns else ["__key"]
        df = df.sort_values(sort, ascending=[True, False] if len(sort) == 2 else [False], kind="stable")
    elif "__order" in df.columns:
        df = df.sort_values(["__order", "__key"], kind="stable")
    start = query.offset
    stop = None if query.limit is None else start + query.limit
    return df.iloc[start:stop]


def _slimit(table: pa.Table, query: m.SeriesQuery, fixed: int) -> pa.Table:
    if query.slimit is None and not query.soffset:
        return table
    values = table.column_names[fixed:]
    if query.soffset and query.soffset >= len(values):
        raise WarehouseError(f"the value of SOFFSET ({query.soffset}) is equal to or exceeds the number of series "
                             f"({len(values)}) that can actually be returned")
    stop = None if query.slimit is None else query.soffset + query.slimit
    return table.select(table.column_names[:fixed] + values[query.soffset:stop])


def _arrow(values: pd.Series, dtype: pa.DataType | None) -> pa.Array:
    """A shaped column back in Arrow, in its query type; pandas' NaN for a missing value is NULL."""
    try:
        return pa.array(values, type=dtype, from_pandas=True)
    except (pa.ArrowInvalid, pa.ArrowTypeError):  # an integer column holding NaN as floats
        return pa.array([None if pd.isna(v) else v for v in values.tolist()], type=dtype)


def _unique(names: list[str]) -> list[str]:
    """Headers as IoTDB prints them; a repeated one gets ``#2``, ``#3``... so Arrow keeps each."""
    seen: dict[str, int] = {}
    out = []
    for name in names:
        seen[name] = seen.get(name, 0) + 1
        out.append(name if seen[name] == 1 else f"{name}#{seen[name]}")
    return out


def _empty_by_device(headers: list[str], without_time: bool) -> pa.Table:
    out = {} if without_time else {TIME: pa.array([], pa.timestamp("us", tz="UTC"))}
    return pa.table({**out, DEVICE: pa.array([], pa.string()), **{h: pa.array([], pa.null()) for h in headers}})


def _empty_by_time(headers: list[str], with_time: bool) -> pa.Table:
    out = {TIME: pa.array([], pa.timestamp("us", tz="UTC"))} if with_time else {}
    return pa.table({**out, **{h: pa.array([], pa.null()) for h in headers}})


# --- expressions to SQL --------------------------------------------------------------------------


def _aggregate_sql(name: str, value: str) -> str:
    """An aggregate of ``value`` in Spark SQL, with IoTDB's meaning and result type."""
    present = f"FILTER (WHERE {value} IS NOT NULL)"
    return {
        "count": f"count({value})",
        "sum": f"sum(CAST({value} AS DOUBLE))",
        "avg": f"avg(CAST({value} AS DOUBLE))",
        "max_value": f"max({value})",
        "min_value": f"min({value})",
        "extreme": f"max_by({value}, struct(abs({value}), {value})) {present}",
        "first_value": f"min_by({value}, {TS}) {present}",
        "last_value": f"max_by({value}, {TS}) {present}",
        "max_time": f"unix_millis(max({TS}) {present})",
        "min_time": f"unix_millis(min({TS}) {present})",
        "stddev": f"stddev_samp(CAST({value} AS DOUBLE))",
        "stddev_samp": f"stddev_samp(CAST({value} AS DOUBLE))",
        "stddev_pop": f"stddev_pop(CAST({value} AS DOUBLE))",
        "variance": f"var_samp(CAST({value} AS DOUBLE))",
        "var_samp": f"var_samp(CAST({value} AS DOUBLE))",
        "var_pop": f"var_pop(CAST({value} AS DOUBLE))",
    }[name]


def _sql(expr: m.SeriesExpr, ref_sql, *, aggregate=None, now: int = 0) -> str:
    """Spark SQL of ``expr``: ``ref_sql(ref)`` gives a series' SQL; ``aggregate`` is True (SQL
    aggregates over the series' column), a function giving an aggregate's SQL, or None (none here)."""
    def go(node: m.SeriesExpr) -> str:
        if isinstance(node, m.Ref):
            return ref_sql(node)
        if isinstance(node, m.Literal):
            if isinstance(node.value, m.TimePoint):
                return str(time_micros(node.value, now))
            return _lit(node.value)
        if isinstance(node, m.TimeRef):
            return f"unix_micros({TS})"
        if isinstance(node, m.Call):
            if node.name in m.AGGREGATES:
                if callable(aggregate):
                    return aggregate(node)
                if aggregate is True:
                    return _aggregate_sql(node.name, go(node.args[0]))
                raise WarehouseError(f"{node.name} is an aggregate; it does not go here")
            args = ", ".join(go(a) for a in node.args)
            inner = f"{SCALAR_FUNCTIONS[node.name]}({args})"
            return inner if node.name in ("length", "upper", "lower", "trim") else f"CAST({inner} AS DOUBLE)"
        if isinstance(node, m.Unary):
            if node.op == "NOT":
                return f"(NOT {go(node.operand)})"
            return f"CAST({node.op}{go(node.operand)} AS DOUBLE)" if node.op == "-" else go(node.operand)
        if isinstance(node, m.Binary):
            left, right = go(node.left), go(node.right)
            if node.op in _ARITHMETIC:
                op = "%" if node.op == "%" else node.op
                return f"(CAST({left} AS DOUBLE) {op} CAST({right} AS DOUBLE))"
            return f"({left} {_SQL_OPS[node.op]} {right})"
        if isinstance(node, m.Between):
            inner = f"{go(node.operand)} BETWEEN {go(node.low)} AND {go(node.high)}"
            return f"(NOT ({inner}))" if node.negated else f"({inner})"
        if isinstance(node, m.InList):
            inner = f"{go(node.operand)} IN ({', '.join(go(v) for v in node.values)})"
            return f"(NOT ({inner}))" if node.negated else f"({inner})"
        raise AssertionError(node)

    return go(expr)


def _measurement_column(columns: dict[str, tuple[str, m.SeriesType]], ref: m.Ref) -> str:
    """The column of a measurement in one database; NULL when the database has no such measurement."""
    name = ref.path.nodes[-1]
    found = columns.get(name)
    return _col(found[0]) if found else "NULL"


def _is_time_condition(node: m.SeriesExpr) -> bool:
    return any(isinstance(n, m.TimeRef) for n in walk(node))


def _conjuncts(node: m.SeriesExpr) -> list[m.SeriesExpr]:
    if isinstance(node, m.Binary) and node.op == "AND":
        return _conjuncts(node.left) + _conjuncts(node.right)
    return [node]


def _and(parts: Sequence[m.SeriesExpr]) -> m.SeriesExpr | None:
    out: m.SeriesExpr | None = None
    for part in parts:
        out = part if out is None else m.Binary("AND", out, part)
    return out


def _value_part(where: m.SeriesExpr) -> m.SeriesExpr | None:
    """The conditions on values: the WHERE without its time conditions (which must be ANDed)."""
    parts = _conjuncts(where)
    for part in parts:
        if _is_time_condition(part) and any(isinstance(n, m.Ref) for n in walk(part)):
            raise WarehouseError("a WHERE condition compares time or values, not both in one condition")
    return _and([p for p in parts if not _is_time_condition(p)])


def _time_part(where: m.SeriesExpr, now: int) -> str | None:
    """The time conditions of WHERE in SQL over ``ts``; a bare number is epoch milliseconds."""
    parts = [p for p in _conjuncts(where) if _is_time_condition(p)]
    if not parts:
        return None

    def convert(node: m.SeriesExpr) -> m.SeriesExpr:
        if isinstance(node, m.Literal) and isinstance(node.value, (int, float)) and not isinstance(node.value, bool):
            return m.Literal(time_micros(node.value, now))
        if isinstance(node, m.Binary):
            return m.Binary(node.op, convert(node.left), convert(node.right))
        if isinstance(node, m.Between):
            return m.Between(convert(node.operand), convert(node.low), convert(node.high), node.negated)
        if isinstance(node, m.InList):
            return m.InList(convert(node.operand), tuple(convert(v) for v in node.values), node.negated)
        if isinstance(node, m.Unary):
            return m.Unary(node.op, convert(node.operand))
        return node

    return " AND ".join(_sql(convert(p), lambda r: "NULL", now=now) for p in parts)


def _replace_ref(expr: m.SeriesExpr, new: m.Ref) -> m.SeriesExpr:
    if isinstance(expr, m.Ref):
        return new
    if isinstance(expr, m.Call):
        return m.Call(expr.name, tuple(_replace_ref(a, new) for a in expr.args), expr.attributes)
    if isinstance(expr, m.Unary):
        return m.Unary(expr.op, _replace_ref(expr.operand, new))
    if isinstance(expr, m.Binary):
        return m.Binary(expr.op, _replace_ref(expr.left, new), _replace_ref(expr.right, new))
    return expr


def _show(expr: m.SeriesExpr, names: dict) -> str:
    """An expression's header as IoTDB prints it: full series paths, spaces around binary operators,
    parentheses around a binary operand."""

    def go(node: m.SeriesExpr, nested: bool) -> str:
        if isinstance(node, m.Ref):
            return names.get(node, str(node.path))
        if isinstance(node, m.Literal):
            value = node.value
            if isinstance(value, bool):
                return "true" if value else "false"
            if isinstance(value, str):
                return f"'{value}'"
            return "null" if value is None else str(value)
        if isinstance(node, m.TimeRef):
            return "Time"
        if isinstance(node, m.Call):
            return f"{node.name}({', '.join(go(a, False) for a in node.args)})"
        if isinstance(node, m.Unary):
            inner = go(node.operand, True)
            return f"!{inner}" if node.op == "NOT" else f"{node.op}{inner}"
        if isinstance(node, m.Binary):
            text = f"{go(node.left, True)} {node.op} {go(node.right, True)}"
            return f"({text})" if nested else text
        return str(node)

    return go(expr, False)


def _max(a: int | None, b: int | None) -> int | None:
    return b if a is None else a if b is None else max(a, b)


def _min(a: int | None, b: int | None) -> int | None:
    return b if a is None else a if b is None else min(a, b)


__all__ = ["DEVICE", "DEVICE_TAG", "TIME", "QueryRunner", "Result", "TimeRange", "now_micros", "time_micros"]
