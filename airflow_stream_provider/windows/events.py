"""Window events: the rows the detector appends to a stream's event table.

One row per ``WINDOW_OPEN``, ``WINDOW_CLOSE`` or ``WINDOW_INVALIDATION``, carrying the fields
reference 000 lists for the trigger type ("Fields of the event Object"): window start and end,
row count, ``prevState``/``curState``/``nextState`` (JSON text of the state value) and the
``triggerCondition`` of event windows, plus the group and a stable ``trigger_id``.

The event table is written here too (:func:`write_events`): a batch's events in one Delta commit,
once per batch. A run reads them back as :class:`WindowEvent` objects (:func:`window_events`), which
travel with the triggers they fire.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

from airflow_stream_provider.model.events import EventType, TriggerKind
from airflow_stream_provider.warehouse import writer
from airflow_stream_provider.windows.columns import empty_windows

#: (name, Spark type) of an event row, in order
EVENT_FIELDS = (
    ("stream", "string"),
    ("trigger_id", "string"),
    ("event_type", "string"),
    ("trigger_type", "string"),
    ("group_id", "string"),
    ("group_keys", "string"),
    ("window_start", "timestamp"),
    ("window_end", "timestamp"),
    ("row_count", "bigint"),
    ("window_ordinal", "bigint"),
    ("prev_state", "string"),
    ("cur_state", "string"),
    ("next_state", "string"),
    ("condition_index", "int"),
    ("field_values", "string"),
    # the trigger table's version the window was decided at, and (JSON) the rows the window counts
    # where they differ from the table's: written for streams of TDengine's engine before 3.3.7
    ("table_version", "bigint"),
    ("adjust", "string"),
    # nested windows (TDengine 3.4.2): (JSON) the windows around the leaf window, outermost first,
    # each [start, end, rows, closed] in microseconds (:mod:`.nested`)
    ("outer_windows", "string"),
)
EVENT_SCHEMA = ", ".join(f"{name} {kind}" for name, kind in EVENT_FIELDS)
EVENT_COLUMNS = tuple(name for name, _ in EVENT_FIELDS)
_ORDER = {EventType.IDLE: -2, EventType.RESUME: -1, EventType.WINDOW_OPEN: 0, EventType.MAX_DELAY: 1,
          EventType.WINDOW_UPDATE: 1, EventType.WINDOW_INVALIDATION: 2, EventType.WINDOW_CLOSE: 3}
#: events of a group's idleness, not of a window (IDLE_TIMEOUT): ``window_start`` and ``window_end``
#: hold the idle span (processing time), and they count no rows
IDLE_KINDS = (EventType.IDLE, EventType.RESUME)


@dataclass(frozen=True, kw_only=True)
class WindowEvent:
    """One window event, as the event table holds it (:data:`EVENT_FIELDS`, and the batch that wrote
    it, its place in that batch and when it was found). Instants are aware datetimes; a field the
    event has not is None."""

    trigger_id: str
    event_type: str
    trigger_type: str
    group_id: str
    group_keys: str  # (JSON) the group's PARTITION BY values
    window_start: datetime
    window_end: datetime | None = None
    row_count: int | None = None
    window_ordinal: int | None = None
    prev_state: str | None = None  # (JSON) the state values of STATE_WINDOW events
    cur_state: str | None = None
    next_state: str | None = None
    condition_index: int | None = None  # EVENT_WINDOW: the condition that opened the window ...
    field_values: str | None = None  # ... and (JSON) the values it saw
    table_version: int | None = None
    adjust: str | None = None
    outer_windows: str | None = None
    stream: str | None = None
    batch_id: int | None = None
    seq: int | None = None
    event_time: datetime | None = None

    def fields(self) -> dict[str, Any]:
        """The event's fields by their event-table names (what a notification's fields are made of)."""
        return {name: getattr(self, name) for name in (*EVENT_COLUMNS, "batch_id", "seq", "event_time")}


_INTEGERS = ("row_count", "window_ordinal", "condition_index", "table_version", "batch_id", "seq")
_INSTANTS = ("window_start", "window_end", "event_time")
_KNOWN = frozenset((*EVENT_COLUMNS, "batch_id", "seq", "event_time"))


def window_events(frame: pd.DataFrame) -> list[WindowEvent]:
    """The events of an event-table frame, in its order."""
    events = []
    for row in frame.to_dict("records"):
        values: dict[str, Any] = {}
        for name, value in row.items():
            if name not in _KNOWN or value is None or (not isinstance(value, str) and pd.isna(value)):
                continue
            if name in _INSTANTS:
                stamp = pd.Timestamp(value)
                value = (stamp if stamp.tzinfo is not None else stamp.tz_localize("UTC")).to_pydatetime()
            elif name in _INTEGERS:
                value = int(value)
            else:
                value = str(value)
            values[name] = value
        events.append(WindowEvent(**values))
    return events


def _json(values: np.ndarray) -> np.ndarray:
    """JSON text of each value (``None`` stays NULL); a state column has few distinct values."""
    values = np.asarray(values, dtype=object)
    kinds = {type(v) for v in values.tolist()} - {type(None)}
    if kinds & {tuple, list}:  # the keys of a STATE_WINDOW of several: a JSON array (each key has one type)
        states = [None if v is None else tuple(v) for v in values.tolist()]
        codes, uniques = pd.factorize(pd.Series(states, dtype=object), use_na_sentinel=True)
        return np.array([*(json.dumps(list(u)) for u in uniques), None], dtype=object)[codes]
    if len(kinds) <= 1:  # 1 and True: equal keys, not the same JSON
        codes, uniques = pd.factorize(values, use_na_sentinel=True)
        return np.array([*(json.dumps(u) for u in uniques), None], dtype=object)[codes]  # NULL: code -1, None
    return np.array([None if v is None else json.dumps(v) for v in values.tolist()], dtype=object)


def _stamps(values: np.ndarray) -> pd.DatetimeIndex:
    """Microseconds since the epoch (:data:`NAT_MICROS`: none) as UTC timestamps."""
    return pd.DatetimeIndex(np.asarray(values, np.int64).view("datetime64[us]"), tz="UTC")


#: the int64 that a datetime64 reads as NaT
NAT_MICROS = np.iinfo(np.int64).min


def event_rows(plan, keys: dict, windows: pd.DataFrame, *, invalidate: pd.DataFrame | None = None,
               delayed: pd.DataFrame | None = None, updated: pd.DataFrame | None = None) -> pd.DataFrame:
    """Events of one group from the windows a scan reported (see :mod:`.core`).

    :param invalidate: windows reported earlier that are no longer valid; each gets a
        ``WINDOW_INVALIDATION`` with its old start and end.
    :param delayed: open windows due for a ``MAX_DELAY`` trigger, as they stand.
    :param updated: open windows whose rows changed, as they stand (``WINDOW_UPDATE``).
    """
    given = ((EventType.WINDOW_INVALIDATION, invalidate), (EventType.MAX_DELAY, delayed),
             (EventType.WINDOW_UPDATE, updated))
    others = [(kind, frame, None) for kind, frame in given if frame is not None]
    return _events(plan, [keys], windows, None, others)


def groups_event_rows(plan, keys: list[dict], windows: pd.DataFrame, group: np.ndarray) -> pd.DataFrame:
    """Events of many groups at once (batch mode): ``windows`` holds the windows of every group,
    ``group`` the index in ``keys`` of each window's group. The same events as
    :func:`event_rows` group by group, in one pass."""
    return _events(plan, keys, windows, np.asarray(group, np.int64), [])


#: the event each kind of window a live batch reports becomes (``windows``: opened or closed)
_KINDS = {"invalidate": EventType.WINDOW_INVALIDATION, "delayed": EventType.MAX_DELAY,
          "updated": EventType.WINDOW_UPDATE, "idle": EventType.IDLE, "resume": EventType.RESUME}


def batch_event_rows(plan, keys: list[dict], found: dict[str, tuple[pd.DataFrame, np.ndarray]]) -> pd.DataFrame:
    """Events of a live batch's groups at once: ``found`` maps each kind of window (``windows``,
    ``invalidate``, ``delayed``, ``updated``) to the windows of every group and the index in ``keys``
    of each one's group. The same events as :func:`event_rows` group by group, in one pass."""
    windows, group = found.get("windows", (None, None))
    if windows is None:
        windows, group = _NO_WINDOWS_FRAME, np.empty(0, np.int64)
    others = [(_KINDS[kind], frame, at) for kind, (frame, at) in found.items() if kind != "windows"]
    return _events(plan, keys, windows, group, others)


def _events(plan, keys: list[dict], windows: pd.DataFrame, group: np.ndarray | None,
            others: Sequence[tuple[EventType, pd.DataFrame, np.ndarray | None]]) -> pd.DataFrame:
    others = [(kind, frame, at) for kind, frame, at in others if len(frame)]
    if not len(windows) and not others:
        return empty_events()
    parts = []
    wanted = set(plan.event_types)
    if EventType.WINDOW_OPEN in wanted:
        opened = windows["opened"].to_numpy(bool)
        parts.append(_part(plan, windows[opened], EventType.WINDOW_OPEN, None if group is None else group[opened]))
    for kind, frame, at in sorted(others, key=lambda other: _ORDER[other[0]]):
        if kind in IDLE_KINDS and kind not in wanted:
            continue
        parts.append(_part(plan, frame, kind, at))
    if EventType.WINDOW_CLOSE in wanted:
        closed = windows["closed"].to_numpy(bool)
        parts.append(_part(plan, windows[closed], EventType.WINDOW_CLOSE, None if group is None else group[closed]))
    parts = [p for p in parts if len(p["_start"])]
    if not parts:
        return empty_events()
    cols = {name: np.concatenate([p[name] for p in parts]) for name in parts[0]}
    n = len(cols["_start"])
    at = cols["_group"]
    if len(parts) > 1 or len(keys) > 1 or np.any(cols["_start"][1:] < cols["_start"][:-1]):
        # a group's idle events first (their span is processing time, not the windows' event time)
        ordinal = window_order(cols["window_ordinal"], plan.spec.conditions > 1)
        order = np.lexsort((cols["_rank"], ordinal, cols["_start"], cols["_rank"] >= 0, at))
        cols = {name: values[order] for name, values in cols.items()}
        at = cols["_group"]
    group_ids = [plan.group_id(k) for k in keys]
    if len(keys) == 1:
        gid: str | np.ndarray = group_ids[0]
        group_id, group_keys = np.full(n, gid, dtype=object), np.full(n, json.dumps(keys[0], default=str), dtype=object)
    else:
        gid = group_id = np.array(group_ids, dtype=object)[at]
        group_keys = np.array([json.dumps(k, default=str) for k in keys], dtype=object)[at]
    null = cols["_null"]
    return pd.DataFrame({
        "stream": np.full(n, plan.stream, dtype=object),
        "trigger_id": plan.trigger_ids(gid, cols["_start"], cols["window_ordinal"],
                                       cols["outer_windows"] if plan.nested else None),
        "event_type": cols["event_type"],
        "trigger_type": np.full(n, plan.spec.trigger_type, dtype=object),
        "group_id": group_id,
        "group_keys": group_keys,
        "window_start": _stamps(cols["_start"]),
        "window_end": _stamps(np.where(null, NAT_MICROS, cols["window_end"])),
        "row_count": pd.arrays.IntegerArray(cols["row_count"], null | cols["_no_count"]),
        "window_ordinal": cols["window_ordinal"],
        "prev_state": cols["prev_state"],
        "cur_state": cols["cur_state"],
        "next_state": cols["next_state"],
        "condition_index": pd.arrays.IntegerArray(cols["condition_index"], cols["_no_condition"]),
        "field_values": cols["field_values"],
        "table_version": pd.array([None] * n, dtype="Int64"),
        "adjust": np.full(n, None, dtype=object),
        "outer_windows": cols["outer_windows"],
    }, columns=list(EVENT_COLUMNS))


def window_order(ordinals: np.ndarray, sub_events: bool) -> np.ndarray:
    """The order of windows that start together: by ordinal, except that the parent of sub-event
    windows (ordinal 0) comes after its sub-windows, as it closes after them: its result, not its
    first sub-window's, is what its output row keeps."""
    ordinals = np.asarray(ordinals, np.int64)
    return np.where(ordinals == 0, np.iinfo(np.int64).max, ordinals) if sub_events else ordinals


def _part(plan, w: pd.DataFrame, kind: EventType, group: np.ndarray | None) -> dict[str, np.ndarray]:
    """The columns of one kind of event for windows ``w``, as arrays (``_null``: the window's end
    and row count are not known yet; ``_no_condition``: no trigger condition)."""
    n = len(w)
    is_open = kind == EventType.WINDOW_OPEN
    idle = kind in IDLE_KINDS
    # states and conditions as when the window opened
    as_open = kind in (EventType.WINDOW_OPEN, EventType.MAX_DELAY, EventType.WINDOW_UPDATE)
    state = plan.spec.kind is TriggerKind.STATE_WINDOW and not idle
    condition = plan.spec.kind is TriggerKind.EVENT_WINDOW and kind != EventType.WINDOW_INVALIDATION and not idle
    none = np.full(n, None, dtype=object)
    return {
        "_group": np.zeros(n, np.int64) if group is None else np.asarray(group, np.int64),
        "_rank": np.full(n, _ORDER[kind], np.int64),
        "_null": np.full(n, is_open, bool),
        "_no_count": np.full(n, idle, bool),
        "event_type": np.full(n, kind, dtype=object),
        "_start": w["wstart"].to_numpy(np.int64),
        "window_end": w["wend"].to_numpy(np.int64),
        "row_count": w["rows"].to_numpy(np.int64),
        "window_ordinal": w["ordinal"].to_numpy(np.int64),
        "prev_state": _json(w["prev_state"].to_numpy(object)) if state and as_open else none,
        "cur_state": _json(w["cur_state"].to_numpy(object)) if state else none,
        "next_state": _json(w["next_state"].to_numpy(object)) if state and kind == EventType.WINDOW_CLOSE else none,
        "condition_index": (w["open_index"] if as_open else w["close_index"]).to_numpy(np.int64).astype(np.int32)
        if condition else np.zeros(n, np.int32),
        "_no_condition": np.full(n, not condition, bool),
        "field_values": (w["open_fields"] if as_open else w["close_fields"]).to_numpy(object) if condition else none,
        "outer_windows": w["outer"].to_numpy(object) if "outer" in w and not idle else none,
    }


def empty_events() -> pd.DataFrame:
    """No events, in the event columns. The detector's step returns this for most groups of most
    batches, so it is a copy of one frame built once (a copy costs a hundredth of a new frame)."""
    return _EMPTY.copy()


_EMPTY = pd.DataFrame({name: pd.Series([], dtype=object) for name in EVENT_COLUMNS})
_NO_WINDOWS_FRAME = empty_windows()


#: the event-table columns Delta keeps file statistics for (the default, every column, costs more than
#: the write itself on the string columns, and trigger ids skip nothing)
EVENT_STATS_COLUMNS = "batch_id,window_start,window_end"
#: an event row as stored: the core's fields, then batch_id, seq and event_time
EVENT_ARROW_SCHEMA = pa.schema(
    [pa.field(name, pa.timestamp("us", tz="UTC") if kind == "timestamp" else
              {"string": pa.string(), "bigint": pa.int64(), "int": pa.int32()}[kind]) for name, kind in EVENT_FIELDS]
    + [pa.field("batch_id", pa.int64()), pa.field("seq", pa.int64()),
       pa.field("event_time", pa.timestamp("us", tz="UTC"))])


def write_events(frames: list[pd.DataFrame], path: str, app_id: str, batch_id: int, at_ms: int) -> pa.Table | None:
    """Append a batch's events once; the rows as stored (None: there were none).

    One commit holds the rows and (app id, batch id) as a Delta transaction; a batch whose
    transaction the table already records is skipped, so a replayed batch is not written twice. A
    batch without events makes no commit. An event table has one writer at a time (the detector
    holding the stream's lock), so this is safe on an object store too.
    """
    stored = event_table(frames, batch_id, at_ms)
    if stored is not None:
        commit_events(stored, path, app_id, batch_id)
    return stored


def event_table(frames: list[pd.DataFrame], batch_id: int, at_ms: int) -> pa.Table | None:
    """A batch's events as the event table stores them (None: there were none)."""
    if not frames:
        return None
    events = pd.concat(frames, ignore_index=True)[list(EVENT_COLUMNS)] if len(frames) > 1 else frames[0]
    count = len(events)
    if not count:
        return None
    table = pa.Table.from_pandas(events, preserve_index=False)
    table = table.append_column("batch_id", pa.array(np.full(count, batch_id, np.int64)))
    table = table.append_column("seq", pa.array(np.arange(count, dtype=np.int64)))
    table = table.append_column("event_time", pa.array(np.full(count, at_ms * 1000, np.int64)).cast(
        pa.timestamp("us", tz="UTC")))
    return pa.table([table.column(f.name).cast(f.type) for f in EVENT_ARROW_SCHEMA], schema=EVENT_ARROW_SCHEMA)


def commit_events(events: pa.Table, path: str, app_id: str, batch_id: int) -> None:
    """Append a batch's stored events (:func:`event_table`) in one commit that records (app id, batch
    id) as a Delta transaction, unless the table records it already."""
    from deltalake import CommitProperties, Transaction, write_deltalake
    from deltalake.exceptions import TableNotFoundError

    commit = CommitProperties(app_transactions=[Transaction(app_id, batch_id)])
    try:
        with writer.latest(path) as table:
            done = table.transaction_version(app_id)
            if done is not None and done >= batch_id:
                return
            # event tables made before a column was added take it on their next write
            write_deltalake(table, events, mode="append", schema_mode="merge", commit_properties=commit)
            version = table.version()
        writer.compact_if_due(path, version)
    except TableNotFoundError:
        write_deltalake(path, events, mode="append", schema_mode="merge", commit_properties=commit,
                        configuration={"delta.dataSkippingStatsColumns": EVENT_STATS_COLUMNS})
