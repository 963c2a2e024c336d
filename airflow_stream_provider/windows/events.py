"""Window events: the rows the detector appends to a stream's event table.

One row per ``WINDOW_OPEN``, ``WINDOW_CLOSE`` or ``WINDOW_INVALIDATION``, carrying the fields
reference 000 lists for the trigger type ("Fields of the event Object"): window start and end,
row count, ``prevState``/``curState``/``nextState`` (JSON text of the state value) and the
``triggerCondition`` of event windows, plus the group and a stable ``trigger_id``.
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd

from airflow_stream_provider import model as m

WINDOW_INVALIDATION = "WINDOW_INVALIDATION"
#: an intermediate trigger of a window still open after MAX_DELAY (processing time)
MAX_DELAY = "MAX_DELAY"

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
)
EVENT_SCHEMA = ", ".join(f"{name} {kind}" for name, kind in EVENT_FIELDS)
EVENT_COLUMNS = tuple(name for name, _ in EVENT_FIELDS)
_ORDER = {m.WINDOW_OPEN: 0, MAX_DELAY: 1, WINDOW_INVALIDATION: 2, m.WINDOW_CLOSE: 3}


def _json(values: np.ndarray) -> np.ndarray:
    """JSON text of each value (``None`` stays NULL); a state column has few distinct values."""
    texts: dict = {}
    out = np.empty(len(values), dtype=object)
    for i, v in enumerate(values.tolist()):
        if v is None:
            out[i] = None
            continue
        key = (type(v), v)  # 1 and True are equal keys, but not the same JSON
        text = texts.get(key)
        if text is None:
            text = texts[key] = json.dumps(v)
        out[i] = text
    return out


def _stamps(values: np.ndarray) -> pd.Series:
    return pd.Series(pd.to_datetime(values, unit="us", utc=True))


def event_rows(plan, keys: dict, windows: pd.DataFrame, *, invalidate: pd.DataFrame | None = None,
               delayed: pd.DataFrame | None = None) -> pd.DataFrame:
    """Events of one group from the windows a scan reported (see :mod:`.core`).

    :param invalidate: windows reported earlier that are no longer valid; each gets a
        ``WINDOW_INVALIDATION`` with its old start and end.
    :param delayed: open windows due for a ``MAX_DELAY`` trigger, as they stand.
    """
    return _events(plan, [keys], windows, None, invalidate, delayed)


def groups_event_rows(plan, keys: list[dict], windows: pd.DataFrame, group: np.ndarray) -> pd.DataFrame:
    """Events of many groups at once (batch mode): ``windows`` holds the windows of every group,
    ``group`` the index in ``keys`` of each window's group. The same events as
    :func:`event_rows` group by group, in one pass."""
    return _events(plan, keys, windows, np.asarray(group, np.int64), None, None)


def _events(plan, keys: list[dict], windows: pd.DataFrame, group: np.ndarray | None,
            invalidate: pd.DataFrame | None, delayed: pd.DataFrame | None) -> pd.DataFrame:
    parts = []
    wanted = set(plan.event_types)
    if m.WINDOW_OPEN in wanted:
        opened = windows["opened"].to_numpy(bool)
        parts.append(_part(plan, windows[opened], m.WINDOW_OPEN, None if group is None else group[opened]))
    if delayed is not None and len(delayed):
        parts.append(_part(plan, delayed, MAX_DELAY, None))
    if invalidate is not None and len(invalidate):
        parts.append(_part(plan, invalidate, WINDOW_INVALIDATION, None))
    if m.WINDOW_CLOSE in wanted:
        closed = windows["closed"].to_numpy(bool)
        parts.append(_part(plan, windows[closed], m.WINDOW_CLOSE, None if group is None else group[closed]))
    parts = [p for p in parts if len(p)]
    if not parts:
        return empty_events()
    frame = pd.concat(parts, ignore_index=True) if len(parts) > 1 else parts[0]
    group_ids = [plan.group_id(k) for k in keys]
    at = frame.pop("_group").to_numpy(np.int64)
    frame.insert(0, "stream", plan.stream)
    starts = frame.pop("_start").to_numpy()
    if len(keys) == 1:
        frame["trigger_id"] = plan.trigger_ids(group_ids[0], starts, frame["window_ordinal"].to_numpy())
        frame["group_id"] = group_ids[0]
        frame["group_keys"] = json.dumps(keys[0], default=str)
    else:
        frame["trigger_id"] = plan.trigger_ids(np.array(group_ids, dtype=object)[at], starts,
                                               frame["window_ordinal"].to_numpy())
        frame["group_id"] = np.array(group_ids, dtype=object)[at]
        frame["group_keys"] = np.array([json.dumps(k, default=str) for k in keys], dtype=object)[at]
    frame["trigger_type"] = plan.spec.trigger_type
    if len(parts) > 1 or len(keys) > 1 or not frame["window_start"].is_monotonic_increasing:
        frame["_group"] = at
        frame["_rank"] = frame["event_type"].map(_ORDER)
        frame = (frame.sort_values(["_group", "window_start", "window_ordinal", "_rank"], kind="stable")
                 .drop(columns=["_group", "_rank"]))
    return frame[list(EVENT_COLUMNS)].reset_index(drop=True)


def _part(plan, w: pd.DataFrame, kind: str, group: np.ndarray | None) -> pd.DataFrame:
    n = len(w)
    is_open = kind == m.WINDOW_OPEN
    as_open = kind in (m.WINDOW_OPEN, MAX_DELAY)  # states and conditions as when the window opened
    state = plan.spec.kind == "state"
    event = plan.spec.kind == "event"
    none = np.full(n, None, dtype=object)
    return pd.DataFrame({
        "_group": np.zeros(n, np.int64) if group is None else group,
        "event_type": np.full(n, kind, dtype=object),
        "_start": w["wstart"].to_numpy(np.int64),
        "window_start": _stamps(w["wstart"].to_numpy(np.int64)),
        "window_end": _stamps(w["wend"].to_numpy(np.int64)) if not is_open else pd.Series(
            pd.array([pd.NaT] * n, dtype="datetime64[us, UTC]")),
        "row_count": w["rows"].to_numpy(np.int64) if not is_open else pd.array([None] * n, dtype="Int64"),
        "window_ordinal": w["ordinal"].to_numpy(np.int64),
        "prev_state": _json(w["prev_state"].to_numpy(object)) if state and as_open else none,
        "cur_state": _json(w["cur_state"].to_numpy(object)) if state else none,
        "next_state": _json(w["next_state"].to_numpy(object)) if state and kind == m.WINDOW_CLOSE else none,
        "condition_index": (w["open_index"] if as_open else w["close_index"]).to_numpy(np.int64).astype("int32")
        if event and kind != WINDOW_INVALIDATION else pd.array([None] * n, dtype="Int32"),
        "field_values": (w["open_fields"] if as_open else w["close_fields"]).to_numpy(object)
        if event and kind != WINDOW_INVALIDATION else none,
    })


def empty_events() -> pd.DataFrame:
    return pd.DataFrame({name: pd.Series([], dtype=object) for name in EVENT_COLUMNS})
