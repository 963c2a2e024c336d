"""The trigger side of a stream, decided once: which table, which columns, which groups, which windows.

A :class:`TriggerPlan` is plain data (expressions kept as TDengine text), so it travels to Spark's
Python workers and into Airflow unchanged. :meth:`TriggerPlan.prepare` turns raw rows of the
trigger table into the rows the window core reads; batch mode, the streaming detector and rescans
all go through it.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
from dataclasses import dataclass
from datetime import UTC, datetime

import numpy as np
import pandas as pd
import pyarrow as pa
from sqlglot import exp

from airflow_stream_provider import config
from airflow_stream_provider import model as m
from airflow_stream_provider.exceptions import StreamDefinitionError, did_you_mean
from airflow_stream_provider.model.events import STREAM_KINDS, EventType, StreamKind, TriggerKind
from airflow_stream_provider.sql.tdengine.dialect import parse_fragment
from airflow_stream_provider.values import epoch_micros
from airflow_stream_provider.warehouse.catalog import Catalog, SubTable
from airflow_stream_provider.windows import expr, rollup
from airflow_stream_provider.windows.core import json_safe, state_column
from airflow_stream_provider.windows.nested import lineage_key
from airflow_stream_provider.windows.spec import WindowSpec


@dataclass(frozen=True)
class IncrementalPolicy:
    """How a stream of incremental windows treats its rows and emits its windows: its
    :class:`~airflow_stream_provider.model.RowAcceptance` and
    :class:`~airflow_stream_provider.model.EmitPolicy` as plain values, times in microseconds, the
    emission as the one ``TRIGGER`` mode it is (TDengine's engine before 3.3.7, reference 003).

    :param table_column: the column naming a row's source table, whose latest row decides whether a
        late row is expired (``tbname`` of a supertable; None: one table).
    """

    mode: str
    ignore_expired: bool = True
    ignore_update: bool = True
    max_delay: int | None = None
    recalculate: int | None = None
    delete_mark: int | None = None
    table_column: str | None = None

    @classmethod
    def of(cls, emit: m.EmitPolicy, rows: m.RowAcceptance, table_column: str | None) -> IncrementalPolicy:
        return cls(mode=str(emit.mode), ignore_expired=rows.ignore_expired, ignore_update=rows.ignore_update,
                   max_delay=emit.max_delay.micros if emit.max_delay else None,
                   recalculate=emit.recalculate_every.micros if emit.recalculate_every else None,
                   delete_mark=rows.delete_mark.micros if rows.delete_mark else None, table_column=table_column)

    @property
    def provisional(self) -> bool:
        """Open windows are written before they close (AT_ONCE, MAX_DELAY)."""
        return self.mode in (m.TriggerMode.AT_ONCE, m.TriggerMode.MAX_DELAY)


@dataclass(frozen=True)
class TriggerPlan:
    stream: str
    spec: WindowSpec
    table: str  # qualified name of the trigger table, for messages
    path: str  # the Delta table holding its rows
    ts_column: str
    keys: tuple[str, ...] = ()  # PARTITION BY columns (or the ROLLUP BY tag), as the table spells them
    #: ROLLUP BY (TDengine 3.4.2): ``keys`` is the one tag whose dotted paths make the groups; the rows
    #: are read once per path prefix (:meth:`expand`), the tag then naming the group
    rollup: bool = False
    subtable: str | None = None  # the trigger table is this subtable of ``path``
    state: str | None = None  # STATE_WINDOW expression (its first key)
    more_states: tuple[str, ...] = ()  # the further keys of a STATE_WINDOW of several
    start: str | None = None  # EVENT_WINDOW START WITH
    more_starts: tuple[str, ...] = ()  # the further START WITH conditions of a sub-event window
    end: str | None = None  # EVENT_WINDOW END WITH
    pre_filter: str | None = None
    count_columns: tuple[str, ...] = ()
    event_types: tuple[str, ...] = (EventType.WINDOW_CLOSE,)
    reads: tuple[str, ...] = ()  # columns besides ts and keys that the expressions read
    row_key: tuple[str, ...] = ()  # the table's row identity (tbname, timestamp[, composite key])
    # how late rows, updates and deletes are treated (STREAM_OPTIONS), times in microseconds
    ignore_disorder: bool = False
    delete_recalc: bool = False
    expired_time: int | None = None
    max_delay: int | None = None
    # IDLE_TIMEOUT (processing time): a group without rows for this long fires IDLE, then RESUME when
    # its rows come back (those of ``event_types``)
    idle_timeout: int | None = None
    history: bool = False  # FILL_HISTORY / FILL_HISTORY_FIRST: rows written before the stream count too
    since: int | None = None  # ... from this event time on; earlier rows are never read
    incremental: IncrementalPolicy | None = None  # incremental windows (RowAcceptance.incremental)
    # nested windows (TDengine 3.4.2): the plans of the layers around the leaf (``spec``), outermost
    # first, and FLUSH_ON_OUTER_CLOSE
    outer: tuple[TriggerPlan, ...] = ()
    flush: bool = False

    @property
    def nested(self) -> bool:
        return bool(self.outer)

    @property
    def recalculates(self) -> bool:
        """Late rows and updates recompute closed windows (not under IGNORE_DISORDER; never for COUNT)."""
        return not self.ignore_disorder and self.spec.kind is not TriggerKind.COUNT_WINDOW

    @property
    def reads_deletes(self) -> bool:
        """Deletes are read (DELETE_RECALC; always into incremental windows)."""
        return self.delete_recalc

    # --- building ---------------------------------------------------------------------------

    @classmethod
    def build(cls, stmt: m.CreateStream, table: object, *, path: str, columns: list[str],
              ts_column: str, subtable: str | None = None, row_key: tuple[str, ...] = (),
              now: datetime | None = None, precision: str = "us") -> TriggerPlan:
        """Plan the trigger of ``stmt`` over a table with ``columns`` (``table`` names it in messages).

        :param row_key: the columns identifying a row (default: the timestamp column).
        :param now: the time ``FILL_HISTORY(now - 1d)`` is measured from (default: the clock).
        :param precision: the trigger table's database precision (``ms`` or ``us``): EXTEND's tick.
        """
        trigger = stmt.trigger
        outer = tuple(cls.build(dataclasses.replace(stmt, trigger=o.trigger, outer_windows=()), f"{table} ({o.name})",
                                path=path, columns=columns, ts_column=ts_column, subtable=subtable,
                                row_key=row_key, now=now, precision=precision) for o in stmt.outer_windows)
        if STREAM_KINDS[trigger.keyword] is not StreamKind.WINDOW:
            raise StreamDefinitionError(f"{trigger.keyword} is not a window trigger; it needs no detector")
        by_lower = {c.lower(): c for c in columns}

        def real(name: str, clause: str) -> str:
            found = by_lower.get(name.lower())
            if found is None:
                raise StreamDefinitionError(f"{clause}: column {name} is not in {table}", clause=clause,
                                            hint=did_you_mean(name, columns))
            return found

        keys = tuple(real(k, "PARTITION BY") for k in stmt.partition_by) if stmt.rollup_by is None else \
            (real(stmt.rollup_by, "ROLLUP BY"),)
        texts: dict[str, str | None] = {"state": None, "start": None, "end": None}
        more_states: tuple[str, ...] = ()
        more_starts: tuple[str, ...] = ()
        reads: list[str] = []

        def use(sql: m.SqlExpression, clause: str) -> str:
            expr.check(sql.tree, clause)
            for name in expr.columns_of(sql.tree, ts_column):
                found = real(name, clause)
                if found != ts_column and found not in keys and found not in reads:
                    reads.append(found)
            return sql.text

        start_fields: tuple[str, ...] = ()
        end_fields: tuple[str, ...] = ()
        if isinstance(trigger, m.StateWindow):
            texts["state"] = use(trigger.column, "STATE_WINDOW")
            more_states = tuple(use(key, "STATE_WINDOW") for key in trigger.keys[1:])
        if isinstance(trigger, m.EventWindow):
            texts["start"] = use(trigger.start, "EVENT_WINDOW START WITH")
            more_starts = tuple(use(c, "EVENT_WINDOW START WITH") for c in trigger.more_starts)
            texts["end"] = use(trigger.end, "EVENT_WINDOW END WITH") if trigger.end is not None else None
            start_fields = tuple(dict.fromkeys(real(n, "EVENT_WINDOW") for c in trigger.starts
                                               for n in expr.columns_of(c.tree, ts_column)))
            end_fields = tuple(real(n, "EVENT_WINDOW") for n in expr.columns_of(trigger.end.tree, ts_column)) \
                if trigger.end is not None else ()
        count_columns: tuple[str, ...] = ()
        if isinstance(trigger, m.CountWindow):
            count_columns = tuple(real(c, "COUNT_WINDOW") for c in trigger.columns)
            for c in count_columns:
                if c not in reads:
                    reads.append(c)
        pre_filter = use(stmt.options.pre_filter, "PRE_FILTER") if stmt.options.pre_filter else None
        if isinstance(trigger, m.SessionWindow):
            real(trigger.ts_column, "SESSION")
        incremental = None
        rows = stmt.rows
        if rows.incremental:
            # the rows incremental windows count differ from the table's where they were dropped or
            # rewritten, and the computation reads every column: its rows are kept whole
            for c in columns:
                if c != ts_column and c not in keys and c not in reads:
                    reads.append(c)
            incremental = IncrementalPolicy.of(stmt.emit, rows, "tbname" if "tbname" in by_lower else None)
        spec = WindowSpec.from_trigger(trigger, stmt.emit, start_fields=start_fields, end_fields=end_fields,
                                       tick=1000 if precision == "ms" else 1,
                                       zone=stmt.timezone or config.timezone_name(), local_days=bool(stmt.timezone))
        opts = stmt.options
        fill = opts.fill_history
        since = None
        if fill is not None and fill.start is not None:
            since = epoch_micros(fill.start.resolve(now or datetime.now(UTC)))
        return cls(
            stream=str(stmt.name), spec=spec, table=str(table), path=path, ts_column=ts_column, keys=keys,
            subtable=subtable, pre_filter=pre_filter, count_columns=count_columns,
            event_types=detected_types(stmt), reads=tuple(reads), row_key=row_key or (ts_column,),
            ignore_disorder=rows.ignore_disorder, delete_recalc=rows.delete_recalc,
            expired_time=rows.expired_time.micros if rows.expired_time else None,
            max_delay=opts.max_delay.micros if opts.max_delay else None,
            idle_timeout=opts.idle_timeout.micros if opts.idle_timeout else None,
            history=fill is not None, since=since, incremental=incremental, more_states=more_states,
            rollup=stmt.rollup_by is not None,
            more_starts=more_starts, outer=outer, flush=stmt.options.flush_on_outer_close, **texts,
        )

    # --- rows -------------------------------------------------------------------------------

    @property
    def columns(self) -> tuple[str, ...]:
        """The trigger-table columns to read: timestamp, keys, then what the expressions use."""
        out = [self.ts_column, *self.keys, *self.reads, *self.row_key]
        for layer in self.outer:
            out += layer.reads
        if self.subtable or self.rollup:  # (ROLLUP BY: a supertable's, whose subtable names a bad path)
            out.append("tbname")
        return tuple(dict.fromkeys(out))

    def expand(self, table: pa.Table) -> pa.Table:
        """Raw trigger-table rows as the groups read them: a ROLLUP BY stream's rows once per rollup
        group of their tag, the tag then naming the group (:func:`.rollup.expand_arrow`); others' as
        they are. Every road that groups raw rows (live batches, rescans, batch mode in the process)
        comes through here."""
        return rollup.expand_arrow(table, self.keys[0]) if self.rollup else table

    @functools.cached_property
    def _trees(self) -> dict[str, exp.Expr]:
        more = tuple((f"state{i}", text) for i, text in enumerate(self.more_states, 1))
        starts = tuple((f"start{i}", text) for i, text in enumerate(self.more_starts, 1))
        texts = (("state", self.state), *more, ("start", self.start), *starts, ("end", self.end),
                 ("pre_filter", self.pre_filter))
        return {name: parse_fragment(text, clause=name) for name, text in texts if text}

    def prepare(self, raw: pd.DataFrame, *, ordered: bool = False, keep: tuple[str, ...] = ()) -> pd.DataFrame:
        """Raw trigger-table rows -> the rows the window core reads, pre-filtered and in time order.

        :param ordered: the caller has put the rows in order already (many groups' rows, each group's
            in time order): they stay as they are.
        :param keep: raw columns carried along unchanged (the caller's group of each row).

        Nested windows: the columns of outer layer ``i`` follow as ``<column>@<i>``
        (:func:`.nested.layer_rows` reads them back).
        """
        if self.outer:
            out = dataclasses.replace(self, outer=()).prepare(raw, ordered=ordered, keep=keep)
            for i, layer in enumerate(self.outer):
                mine = layer.prepare(raw, ordered=ordered)
                out = out.assign(**{f"{c}@{i}": mine[c].to_numpy() for c in mine.columns if c != "ts"})
            return out
        index = raw.index
        plain = isinstance(index, pd.RangeIndex) and index.start == 0 and index.step == 1
        frame = raw if plain else raw.reset_index(drop=True)
        if self.subtable is not None:
            frame = frame[frame["tbname"] == self.subtable].reset_index(drop=True)
        trees = self._trees
        view = _as_timestamps(frame, self.ts_column) if trees and len(frame) else frame  # what conditions read
        if "pre_filter" in trees and len(frame):
            kept = expr.holds(trees["pre_filter"], view, self.ts_column)
            frame, view = frame[kept].reset_index(drop=True), view[kept].reset_index(drop=True)
        columns: dict[str, object] = {"ts": micros(frame[self.ts_column])}  # one frame built, at the end
        keys = ("state", *(f"state{i}" for i in range(1, len(self.more_states) + 1))) if "state" in trees else ()
        for index, name in enumerate(keys):
            value = expr.evaluate(trees[name], frame, self.ts_column) if len(frame) else pd.Series([], dtype=object)
            # numbers stay numbers (NULL: NaN), anything else is Python objects (NULL: None)
            value = value if value.dtype.kind in "biuf" else value.astype(object).where(value.notna(), None)
            columns[state_column(index)] = value.to_numpy()
        if "start" in trees:
            for name in ("start", "end"):
                columns[f"_{name}"] = expr.holds(trees[name], view, self.ts_column) if len(frame) and name in trees \
                    else np.zeros(len(frame), bool)
            if self.more_starts:  # a sub-event window: the first condition that holds on each row (-1: none)
                first = np.asarray(columns["_start"], bool)
                effective = np.where(first, 0, -1).astype(np.int64)
                for i in range(len(self.more_starts), 0, -1):
                    held = expr.holds(trees[f"start{i}"], view, self.ts_column) if len(frame) else np.empty(0, bool)
                    effective = np.where(held & (effective != 0), i, effective)
                columns["_cond"] = effective
                columns["_start"] = effective >= 0
            for name in dict.fromkeys(self.spec.start_fields + self.spec.end_fields):
                column = frame[name]  # numbers as they are, anything else as Python objects
                columns[f"_f_{name}"] = column.to_numpy() if column.dtype.kind in "biuf" else column.to_numpy(object)
        if self.count_columns:
            columns["_valid"] = frame[list(self.count_columns)].notna().any(axis=1).to_numpy(bool)
        for name in keep:
            columns[name] = frame[name].to_numpy()
        out = pd.DataFrame(columns)
        ts = columns["ts"]
        assert isinstance(ts, np.ndarray)
        if ordered or len(ts) < 2 or bool(np.all(ts[1:] > ts[:-1])):  # in time order without ties already
            return out
        order = ["ts", "_tie"] if "tbname" in frame else ["ts"]
        if "tbname" in frame:
            out["_tie"] = frame["tbname"].to_numpy(object)
        return out.sort_values(order, kind="stable").drop(columns=["_tie"], errors="ignore").reset_index(drop=True)

    # --- identity ---------------------------------------------------------------------------

    def group_keys(self, values: tuple) -> dict[str, object]:
        return {k: json_safe(v) for k, v in zip(self.keys, values)}

    @staticmethod
    def group_id(keys: dict[str, object]) -> str:
        """A stable number for a group, as TDengine's groupId: the same keys give the same id."""
        digest = hashlib.blake2b(json.dumps(keys, sort_keys=True, default=str).encode(), digest_size=8).digest()
        return str(int.from_bytes(digest, "big") >> 1)

    def trigger_ids(self, group_id: str | np.ndarray, starts: np.ndarray, ordinals: np.ndarray,
                    outer: np.ndarray | None = None) -> list[str]:
        """One id per window, the same across restarts and reruns: stream, group, window start (and
        ordinal for COUNT_WINDOW). ``group_id`` is the group of every window, or one per window.
        ``outer``: nested windows, (JSON) the outer windows of each; leaf windows that start together
        in different outer windows get different ids."""
        gids = [group_id] * len(starts) if isinstance(group_id, str) else group_id.tolist()
        prefixes: dict[str, hashlib.blake2b] = {}
        out = []
        keys: dict[str, str | None] = {}  # the windows of an outer window share its text
        lineages = [None] * len(starts) if outer is None else \
            [keys[text] if text in keys else keys.setdefault(text, lineage_key(text)) for text in outer.tolist()]
        for gid, s, o, line in zip(gids, starts.tolist(), ordinals.tolist(), lineages, strict=True):
            prefix = prefixes.get(gid)
            if prefix is None:
                prefix = prefixes[gid] = hashlib.blake2b(f"{self.stream.lower()}\x1f{gid}\x1f".encode(), digest_size=12)
            h = prefix.copy()  # the same digest as hashing prefix + suffix in one go
            h.update(f"{s}\x1f{o}".encode() if line is None else f"{s}\x1f{o}\x1f{line}".encode())
            out.append(h.hexdigest())
        return out


def _as_timestamps(frame: pd.DataFrame, ts_column: str) -> pd.DataFrame:
    """``frame`` with its timestamp column as UTC timestamps when it holds epoch microseconds (the
    rows of a legacy group), so that a condition compares it with a date string as TDengine does."""
    if not pd.api.types.is_integer_dtype(frame[ts_column].dtype):
        return frame
    return frame.assign(**{ts_column: pd.to_datetime(frame[ts_column].to_numpy(np.int64), unit="us", utc=True)})


def micros(values: pd.Series) -> np.ndarray:
    """Timestamps (datetime64 of any unit, or aware) as int64 microseconds since the epoch."""
    if len(values) == 0:
        return np.empty(0, np.int64)
    if pd.api.types.is_integer_dtype(values.dtype):
        return values.to_numpy(np.int64)
    if isinstance(values.dtype, pd.DatetimeTZDtype):
        values = values.dt.tz_convert("UTC").dt.tz_localize(None)
    elif not pd.api.types.is_datetime64_dtype(values.dtype):
        values = pd.to_datetime(values, utc=True).dt.tz_localize(None)
    return values.to_numpy().astype("datetime64[us]").astype(np.int64)


def plan_trigger(stmt: m.CreateStream, catalog: Catalog, default_db: str | None = None) -> TriggerPlan:
    """The trigger plan of ``stmt`` over its trigger table in the warehouse ``catalog``."""
    if stmt.trigger_table is None:
        raise StreamDefinitionError(f"{stmt.trigger.keyword} triggers need a trigger table (FROM)")
    db = stmt.trigger_table.db or default_db or stmt.name.db
    if db is None:
        raise StreamDefinitionError(f"stream {stmt.name}: name the trigger table's database ({stmt.trigger_table})")
    found = catalog.resolve(stmt.trigger_table, db, "trigger table")
    info = found.stable if isinstance(found, SubTable) else found
    return TriggerPlan.build(
        stmt, found.qualified, path=str(info.path), columns=[c.name for c in info.columns],
        ts_column=info.timestamp_column, subtable=found.name if isinstance(found, SubTable) else None,
        row_key=info.key_columns, precision=info.precision,
    )


def detected_types(stmt: m.CreateStream) -> tuple[str, ...]:
    """The window events a stream needs: those its emit policy emits, and those it notifies; and the
    IDLE and RESUME events of either (IDLE_TIMEOUT)."""
    emit = stmt.emit
    wanted = {t for t, on in ((EventType.WINDOW_OPEN, emit.on_open), (EventType.WINDOW_CLOSE, emit.on_close)) if on}
    detected = (EventType.WINDOW_OPEN, EventType.WINDOW_CLOSE, EventType.IDLE, EventType.RESUME)
    wanted |= set(stmt.options.event_types) & {EventType.IDLE, EventType.RESUME}
    if stmt.notify is not None:
        wanted |= set(stmt.notify.on) & set(detected)
    return tuple(t for t in detected if t in wanted)
