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
from dataclasses import dataclass, field

import pandas as pd
import pyarrow as pa
from sqlglot import exp

from airflow_stream_provider import model as m
from airflow_stream_provider.model.series import walk
from airflow_stream_provider.sql.spark import write_spark
from airflow_stream_provider.warehouse.catalog import WarehouseError
from airflow_stream_provider.warehouse.series import attached
from airflow_stream_provider.warehouse.series.expressions import (
    aggregate,
    aliased,
    bigint,
    call,
    column,
    delta_table,
    header_of,
    literal,
    measurement,
    now_micros,
    replace_ref,
    time_micros,
    time_part,
    to_tree,
    value_part,
)
from airflow_stream_provider.warehouse.series.shaping import (
    DEVICE,
    TIME,
    Windows,
    apply_fill,
    arrow,
    complete_windows,
    empty_by_device,
    empty_by_time,
    paginate,
    slimit,
    time_column,
    unique_headers,
)
from airflow_stream_provider.warehouse.series.store import TBNAME, TS, Series, SeriesDatabase, SeriesStore


@dataclass(frozen=True)
class TimeRange:
    """``[start, end)`` in epoch microseconds; None for an open side."""

    start: int | None = None
    end: int | None = None


@dataclass
class ResultColumn:
    """One column of an ALIGN BY TIME result: its header, and the series it was expanded from (for
    INTO's placeholders)."""

    name: str
    series: tuple[Series, ...]
    item: int


@dataclass
class ShapedResult:
    """A shaped result: the Arrow table, and for each value column the item it came from and its series."""

    table: pa.Table
    columns: list[ResultColumn] = field(default_factory=list)
    by_device: bool = False
    #: ALIGN BY DEVICE: item -> the header of its column
    item_names: list[str] = field(default_factory=list)
    #: ALIGN BY DEVICE: the devices the query reads, in order, also those without rows in its range
    devices: list[str] = field(default_factory=list)


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

    def run(self) -> ShapedResult:
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
                out.append((item.alias or header_of(item.expr, {}), item.expr))
                continue
            if len(refs) != 1:
                raise WarehouseError(f"a wildcard measurement goes alone in an expression: {header_of(item.expr, {})}")
            names: list[str] = []
            pattern = m.SeriesPath(wild[0].path.nodes)
            for s in self.all_series:
                if pattern.matches((s.measurement,)) and s.measurement not in names:
                    names.append(s.measurement)
            for name in names:
                expr = replace_ref(item.expr, m.Ref(m.SeriesPath((name,))))
                out.append((header_of(expr, {}), expr))
        return out

    def _by_device(self) -> ShapedResult:
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
            return ShapedResult(empty_by_device(headers, query.aggregated and query.group_by is None),
                          by_device=True, item_names=headers)
        window = self._windows()
        parts = []
        for db in dict.fromkeys(d for d, _ in devices):
            names = [str(dev) for d, dev in devices if d == db]
            parts.append(self._device_select(db, names, items, window))
        frame = self.spark.sql(write_spark(_union_all(parts))).toArrow()
        shaped = self._shape_by_device(frame, headers, window, [str(dev) for _, dev in devices])
        shaped.devices = [str(dev) for _, dev in devices]
        return shaped

    def _device_select(self, db: SeriesDatabase, devices: list[str], items: list[tuple[str, m.SeriesExpr]],
                       window: Windows | None) -> exp.Select:
        query = self.query
        ref = functools.partial(measurement, self._columns_of(db))
        aggregated = query.aggregated
        values = [aliased(to_tree(expr, ref, aggregates=aggregated), f"v{i}") for i, (_, expr) in enumerate(items)]
        select = exp.select(_KEY, exp.column(TBNAME), *values).from_(self._rows(db, devices, window).subquery())
        if query.where is not None:
            value_where = value_part(query.where)
            if value_where is not None:
                select = select.where(to_tree(value_where, ref))
        if not aggregated:
            return select
        select = select.group_by(_KEY, exp.column(TBNAME))
        if query.having is not None:
            select = select.having(to_tree(query.having, ref, aggregates=True))
        return select

    def _shape_by_device(self, frame: pa.Table, headers: list[str], window: Windows | None,
                         devices: list[str]) -> ShapedResult:
        query = self.query
        df = frame.to_pandas()
        df["__order"] = df[TBNAME].map({d: i for i, d in enumerate(devices)})  # devices in creation order
        df = df.sort_values(["__order", "__key"], kind="stable")  # FILL reads each device's rows in time order
        values = [f"v{i}" for i in range(len(headers))]
        if query.aggregated and window is not None:
            df = complete_windows(df, window, values, self._count_items(), devices=devices)
        if not query.aggregated:
            df = df[df[values].notna().any(axis=1)] if values else df
        if query.fill is not None:
            df = apply_fill(df, values, query.fill, by=TBNAME)
        df = paginate(df, query)
        out = {}
        if not (query.aggregated and window is None):
            out[TIME] = time_column(df["__key"], window)
        out[DEVICE] = pa.array(df[TBNAME].tolist(), pa.string())
        for header, value in zip(headers, values, strict=True):
            out[header] = arrow(df[value], frame.schema.field(value).type if value in frame.column_names else None)
        table = pa.table(out)
        table = slimit(table, query, fixed=2 if TIME in out else 1)
        return ShapedResult(table, by_device=True, item_names=headers)

    def _count_items(self) -> list[int]:
        return [i for i, item in enumerate(self.query.items) if _is_count(item.expr)]

    # --- rows and windows ------------------------------------------------------------------------

    def _windows(self) -> Windows | None:
        group = self.query.group_by
        if group is None:
            return None
        span = self.time_range()
        if span.start is None or span.end is None:
            raise WarehouseError("GROUP BY needs a time range: GROUP BY ([start, end), interval)")
        return Windows(span.start, span.end, group.interval.micros, group.sliding.micros, group.left_open)

    def _rows(self, db: SeriesDatabase, devices: list[str], window: Windows | None) -> exp.Select:
        """The rows of ``devices`` of ``db`` in the query's time range, with ``__key``: the time
        (micros) for a raw query, the window start for GROUP BY, 0 for an aggregate of all rows.

        A row at ``__t`` is in the windows ``k`` with ``start + k * step <= __t < start + k * step + size``:
        the one ``k = floor((__t - start) / step)`` when windows do not overlap, else every ``k`` from
        ``ceil((__t - start - size + 1) / step)`` (at least 0) to that one."""
        span = self.time_range()
        conditions: list[exp.Expr] = [exp.column(TBNAME).isin(*(literal(d) for d in devices))]
        micros = call("unix_micros", exp.column(TS))
        if window is not None and window.left_open:
            micros = exp.Paren(this=exp.Sub(this=micros, expression=_number(1)))
        if span.start is not None:
            conditions.append(exp.GTE(this=micros.copy(), expression=_number(span.start)))
        if span.end is not None:
            conditions.append(exp.LT(this=micros.copy(), expression=_number(span.end)))
        if self.query.where is not None:
            time_where = time_part(self.query.where, self.now)
            if time_where is not None:
                conditions.append(time_where)
        rows = attached.source(db) if db.attached else delta_table(db.table)
        base = exp.select(exp.Star(), exp.alias_(micros, "__t")).from_(rows) \
            .where(exp.and_(*conditions))
        if window is None:
            key = exp.column("__t") if not self.query.aggregated else _number(0)
            return exp.select(exp.Star(), exp.alias_(key, "__key")).from_(base.subquery())
        start, step, size = window.start, window.step, window.interval
        since = exp.Paren(this=exp.Sub(this=exp.column("__t"), expression=_number(start)))
        last = bigint(exp.Floor(this=exp.Div(this=since, expression=_number(step))))
        if step >= size:
            keyed = exp.select(exp.Star(), exp.alias_(_window_start(start, last, step), "__key")).from_(base.subquery())
            inside = exp.LT(this=exp.Sub(this=exp.column("__t"), expression=_KEY.copy()), expression=_number(size))
            return exp.select(exp.Star()).from_(keyed.subquery()).where(inside)
        reach = exp.Add(this=exp.Sub(this=since.copy(), expression=_number(size)), expression=_number(1))
        first = bigint(call("greatest", _number(0), exp.Ceil(this=exp.Div(this=exp.Paren(this=reach),
                                                                           expression=_number(step)))))
        each = exp.select(exp.Star(), exp.alias_(exp.Explode(this=call("sequence", first, last)), "__k")) \
            .from_(base.subquery())
        keyed = exp.select(exp.Star(), exp.alias_(_window_start(start, exp.column("__k"), step), "__key")) \
            .from_(each.subquery())
        return exp.select(exp.Star()).from_(keyed.subquery()).where(exp.LT(this=_KEY.copy(),
                                                                           expression=_number(window.end)))

    def _columns_of(self, db: SeriesDatabase) -> dict[str, tuple[str, m.SeriesType]]:
        registry = self.store.registry(db)
        return {name: (c["column"], m.SeriesType(c["type"])) for name, c in registry.columns.items()}

    # --- ALIGN BY TIME ---------------------------------------------------------------------------

    def _by_time(self) -> ShapedResult:
        query = self.query
        columns = self._expand_columns()
        window = self._windows()
        if not columns:
            return ShapedResult(empty_by_time([], with_time=not (query.aggregated and window is None)))
        one_device = len({(s.database, s.device) for c in columns for s in c.series}) == 1
        value_where = value_part(query.where) if query.where is not None else None
        if query.having is not None and not one_device:
            raise WarehouseError("HAVING reads the series of one device here: use ALIGN BY DEVICE, or FROM one device")
        if value_where is not None and not one_device and query.aggregated:
            raise WarehouseError("a WHERE on values of an aggregated query reads the series of one device here: "
                                 "use ALIGN BY DEVICE, or FROM one device")
        select = self._pivot(columns, window, value_where, one_device)
        frame = self.spark.sql(write_spark(select)).toArrow()
        return self._shape_by_time(frame, columns, window)

    def _expand_columns(self) -> list[ResultColumn]:
        query = self.query
        out: list[ResultColumn] = []
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
                name = item.alias or header_of(item.expr, {r: str(s.path) for r, s in binding.items()})
                out.append(ResultColumn(name, tuple(combo), index))
        return out

    def _level_columns(self, index: int, item: m.SelectItem, refs: list[m.Ref],
                       choices: list[list[Series]]) -> list[ResultColumn]:
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
        return [ResultColumn(item.alias or f"{expr.name}({key})", tuple(members), index)
                for key, members in groups.items()]

    def _pivot(self, columns: list[ResultColumn], window: Windows | None, value_where: m.SeriesExpr | None,
               one_device: bool) -> exp.Select:
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
        union = self._union(by_db, slot, window, value_where if one_device else None)
        if not query.aggregated:
            select = self._raw_pivot(columns, slot, union)
            if value_where is not None and not one_device:
                iterator = iter(where_series)
                select = select.where(to_tree(value_where, lambda r: column(slot[next(iterator)])))
            return select
        return self._aggregated_pivot(columns, slot, union)

    def _union(self, by_db: dict[SeriesDatabase, list[Series]], slot: dict[Series, str], window: Windows | None,
               device_where: m.SeriesExpr | None) -> exp.Subquery:
        """The rows of every database: the key, the time and a column per series (its slot), NULL
        but for the rows of its device; ``device_where``: a WHERE on values of the one device read."""
        unions = []
        for db, members in by_db.items():
            devices = sorted({str(s.device) for s in members})
            rows = self._rows(db, devices, window)
            if device_where is not None:
                condition = to_tree(device_where, functools.partial(measurement, self._columns_of(db)))
                rows = exp.select(exp.Star()).from_(rows.subquery()).where(condition)
            picks = [aliased(exp.Case().when(exp.column(TBNAME).eq(literal(str(s.device))), column(s.column))
                             if s in members else exp.null(), slot[s]) for s in slot]
            unions.append(exp.select(_KEY, exp.column(TS), *picks).from_(rows.subquery()))
        return _union_all(unions).subquery()

    def _raw_pivot(self, columns: list[ResultColumn], slot: dict[Series, str], union: exp.Subquery) -> exp.Select:
        """A row per time with each series' value, then each column's expression over them."""
        query = self.query
        pivot = [aliased(call("max", column(v)), v) for v in slot.values()]
        stage = exp.select(_KEY, *pivot).from_(union).group_by(_KEY)
        exprs = []
        for i, result in enumerate(columns):
            expr = query.items[result.item].expr
            refs = list(dict.fromkeys(n for n in walk(expr) if isinstance(n, m.Ref)))
            binding = dict(zip(refs, result.series, strict=True))
            exprs.append(aliased(to_tree(expr, functools.partial(_slot_of, slot, binding)), f"c{i}"))
        return exp.select(_KEY, *exprs).from_(stage.subquery())

    def _aggregated_pivot(self, columns: list[ResultColumn], slot: dict[Series, str],
                          union: exp.Subquery) -> exp.Select:
        """Every aggregate of every series per key (window, or 0 for all rows), then each column's
        expression over them."""
        query = self.query
        # aggregated: every aggregate of every series, then the expressions over them
        aggregates: dict[tuple[str, Series | tuple[Series, ...]], str] = {}
        exprs = []
        for i, result in enumerate(columns):
            item = query.items[result.item]
            if query.levels:
                level_call = item.expr
                assert isinstance(level_call, m.Call)
                merged: tuple[str, Series | tuple[Series, ...]] = (level_call.name, result.series)
                if merged not in aggregates:
                    aggregates[merged] = f"a{len(aggregates)}"
                exprs.append(aliased(column(aggregates[merged]), f"c{i}"))
                continue
            refs = list(dict.fromkeys(n for n in walk(item.expr) if isinstance(n, m.Ref)))
            binding = dict(zip(refs, result.series, strict=True))

            def aggregate_of(of: m.Call, b=binding) -> exp.Expr:
                ref = of.args[0]
                target = b[ref] if isinstance(ref, m.Ref) else None
                if target is None:
                    raise WarehouseError(f"{of.name} aggregates a series, as {of.name}(temperature)")
                key = (of.name, target)
                if key not in aggregates:
                    aggregates[key] = f"a{len(aggregates)}"
                return column(aggregates[key])

            exprs.append(aliased(to_tree(item.expr, lambda r: exp.null(), aggregates=aggregate_of), f"c{i}"))
        parts = []
        for (name, target), alias in aggregates.items():
            read = target if isinstance(target, tuple) else (target,)
            values = [column(slot[s]) for s in read]
            parts.append(aliased(aggregate(name, values[0] if len(values) == 1 else call("coalesce", *values)), alias))
        # a row of the union is one device's: a level group's series (one per device) coalesce into one value
        stage = exp.select(_KEY, *parts).from_(union).group_by(_KEY)
        return exp.select(_KEY, *exprs).from_(stage.subquery())

    def _shape_by_time(self, frame: pa.Table, columns: list[ResultColumn], window: Windows | None) -> ShapedResult:
        query = self.query
        values = [f"c{i}" for i in range(len(columns))]
        df = frame.to_pandas()
        counts = [i for i, c in enumerate(columns) if _is_count(query.items[c.item].expr)]
        if query.aggregated and window is not None:
            df = complete_windows(df, window, values, counts)
        elif query.aggregated:
            if df.empty:
                df = pd.DataFrame({"__key": [0], **{v: [None] for v in values}})
            for i in counts:
                df[values[i]] = df[values[i]].fillna(0)
        else:
            df = df[df[values].notna().any(axis=1)] if values else df
            df = df.sort_values("__key")
        if query.fill is not None:
            df = apply_fill(df, values, query.fill)
        df = paginate(df, query)
        out: dict[str, pa.Array] = {}
        with_time = not (query.aggregated and window is None)
        if with_time:
            out[TIME] = time_column(df["__key"], window)
        names = unique_headers([c.name for c in columns])
        for name, value in zip(names, values, strict=True):
            out[name] = arrow(df[value], frame.schema.field(value).type if value in frame.column_names else None)
        table = pa.table(out) if out else pa.table({})
        table = slimit(table, query, fixed=1 if with_time else 0)
        kept = set(table.column_names)
        return ShapedResult(table, [c for c, n in zip(columns, names, strict=True) if n in kept])


#: the key of a result row: its time (epoch microseconds), its window's start, or 0 for one row of aggregates
_KEY = exp.column("__key")


def _number(value: int) -> exp.Expr:
    return exp.Literal.number(value)


def _window_start(start: int, k: exp.Expr, step: int) -> exp.Expr:
    """``start + k * step``."""
    return exp.Add(this=_number(start), expression=exp.Mul(this=k, expression=_number(step)))


def _union_all(selects: list[exp.Select]) -> exp.Query:
    union: exp.Query = selects[0]
    for select in selects[1:]:
        union = exp.union(union, select, distinct=False)
    return union


def _slot_of(slot: dict[Series, str], binding: dict[m.Ref, Series], ref: m.Ref) -> exp.Expr:
    """The pivot's column of the series ``ref`` is bound to."""
    return column(slot[binding[ref]])


def _is_count(expr: m.SeriesExpr) -> bool:
    """A count: 0, not NULL, for a window without rows."""
    return isinstance(expr, m.Call) and expr.name == "count"


def _max(a: int | None, b: int | None) -> int | None:
    return b if a is None else a if b is None else max(a, b)


def _min(a: int | None, b: int | None) -> int | None:
    return b if a is None else a if b is None else min(a, b)
