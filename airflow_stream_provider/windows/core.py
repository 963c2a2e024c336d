"""The window core: where windows of every TDengine trigger type open and close.

One scanner per trigger type walks a group's rows in event-time order and returns the windows that
opened or closed, plus a small *carry*: the open window(s) and counters, JSON-safe, so that the
next call continues exactly where this one stopped. Batch mode calls a scanner once over all rows
of a group; the streaming detector calls it once per micro-batch with the carry kept in Spark
state. Either way the same code decides, so both give the same windows.

Input rows are a pandas DataFrame, or a :class:`Chunk` of numpy columns, sorted by ``ts`` (int64
microseconds since the epoch) holding only the rows the caller judged eligible (pre-filtered, at or
before the watermark), plus the columns the trigger type needs:

=========  ===================================================================================
type       columns
=========  ===================================================================================
interval   ``ts``
session    ``ts``
state      ``ts``, ``_state`` (NULL rows are skipped: they neither open nor split a window)
event      ``ts``, ``_start``, ``_end`` (booleans), the condition columns ``_f_<name>``; sub-event
           windows also ``_cond`` (the first START WITH condition holding, -1 for none)
count      ``ts``, ``_valid`` (boolean: the row counts)
=========  ===================================================================================

Each scanner is told the trigger as a :class:`.spec.WindowSpec` and returns :class:`.columns.Windows`
(a frame of them with :func:`scan`), in :data:`.columns.WINDOW_COLUMNS`: the windows that opened
or closed in this call.

The five scanners share the carry format, the window columns and the late-data rules, and keeping
them side by side is what keeps them consistent.
"""

from __future__ import annotations

import json
from bisect import bisect_left
from typing import Any, TypeAlias

import numpy as np
import pandas as pd

from airflow_stream_provider.model.events import TriggerKind
from airflow_stream_provider.windows.columns import NO_WINDOWS, Windows, empty_windows, window_columns, window_frame
from airflow_stream_provider.windows.spec import WindowSpec
from airflow_stream_provider.windows.state_keys import (
    json_safe,
    json_safe_values,
    key_safe,
    key_values,
    state_column,
    state_key,
    state_rows,
)
from airflow_stream_provider.windows.streaks import event_streaks
from airflow_stream_provider.windows.subevents import event_subwindows


def _json_texts(values: np.ndarray) -> list[str]:
    """JSON text of :func:`json_safe` of each value (numbers are encoded in one call)."""
    if values.dtype.kind in "biuf" and len(values):
        items = values.astype(object)
        if values.dtype.kind == "f":
            items[np.isnan(values)] = None  # NaN is NULL
        return json.dumps(items.tolist())[1:-1].split(", ")
    return [json.dumps(json_safe(v)) for v in values.tolist()]


def _fields_texts(columns: dict[str, np.ndarray], rows: list) -> list:
    """The condition columns' values as JSON (``columns``: name -> values), for each entry of
    ``rows`` that is a row index; other entries (JSON already, or ``None``) stay as they are."""
    at = [i for i, r in enumerate(rows) if isinstance(r, int)]
    if not at:
        return rows
    index = np.array([rows[i] for i in at], np.int64)
    names = [json.dumps(name) for name in columns]
    texts = [_json_texts(values[index]) for values in columns.values()]
    out = list(rows)
    for j, i in enumerate(at):
        out[i] = "{" + ", ".join(f"{name}: {t[j]}" for name, t in zip(names, texts, strict=True)) + "}"
    return out


def _fields_json(columns: dict[str, np.ndarray], index: int) -> str:
    """The condition columns' values at a row, as JSON."""
    return _fields_texts(columns, [index])[0]


# --- scanners ------------------------------------------------------------------------------


class Chunk:
    """A group's rows as numpy columns: slices of a batch's columns, so that the live detector, which
    scans each group of each batch for a row or a few, builds no DataFrame per group."""

    __slots__ = ("columns", "length")

    def __init__(self, columns: dict[str, np.ndarray], length: int) -> None:
        self.columns = columns
        self.length = length

    def __len__(self) -> int:
        return self.length

    def __contains__(self, name: str) -> bool:
        return name in self.columns


#: the rows a scanner reads
Rows: TypeAlias = "pd.DataFrame | Chunk"


def _values(rows: Rows, name: str, dtype: type | None = None) -> np.ndarray:
    """Column ``name`` of ``rows`` as a numpy array (of ``dtype``, when given)."""
    if not isinstance(rows, Chunk):
        return rows[name].to_numpy() if dtype is None else rows[name].to_numpy(dtype)
    values = rows.columns[name]
    return values if dtype is None or values.dtype == dtype else values.astype(dtype)


def _flags(rows: Rows, name: str) -> np.ndarray:
    """Condition column ``name`` as booleans, NULL as false."""
    if not isinstance(rows, Chunk):
        return rows[name].fillna(False).to_numpy(bool)
    values = rows.columns[name]
    if values.dtype == bool:
        return values
    known = ~pd.isna(values)
    out = np.zeros(len(values), bool)
    out[known] = values[known].astype(bool)
    return out


def scan(spec: WindowSpec, rows: Rows, carry: dict | None, *, watermark: int | None = None,
         final: bool = False, reported_only: bool = False) -> tuple[pd.DataFrame, dict | None]:
    """Continue the scan of one group over ``rows``: :func:`scan_columns`, the windows as a frame."""
    windows, carry = scan_columns(spec, rows, carry, watermark=watermark, final=final, reported_only=reported_only)
    return windows.frame(), carry


def scan_columns(spec: WindowSpec, rows: Rows, carry: dict | None, *, watermark: int | None = None,
                 final: bool = False, reported_only: bool = False) -> tuple[Windows, dict | None]:
    """Continue the scan of one group over ``rows``: the windows that opened or closed, and the carry.

    :param carry: what the previous call returned (``None`` for a fresh group).
    :param watermark: event time up to which the group is complete; time-based windows (INTERVAL,
        SESSION) close once it passes their end. Defaults to the last row's time minus WATERMARK.
    :param final: close every window at the end, as a query over a finished table does.
    :param reported_only: leave out the windows that neither opened nor closed (a session that goes
        on): the live detector, which turns windows into events, needs no others.
    """
    if watermark is None:
        last = int(_values(rows, "ts")[-1]) if len(rows) else (carry or {}).get("max_ts")
        watermark = None if last is None else last - spec.watermark
    result, carry = _SCANNERS[spec.kind](spec, rows, carry, watermark, final, reported_only)
    if carry is not None and len(rows):
        carry["max_ts"] = max(int(_values(rows, "ts")[-1]), carry.get("max_ts", -(2**63)))
    return result, carry


def _interval(spec: WindowSpec, rows: Rows, carry: dict | None, watermark: int | None,
              final: bool, reported_only: bool = False) -> tuple[Windows, dict | None]:
    carry = dict(carry) if carry else {"lo": None, "counts": {}}
    counts: dict[int, int] = {int(k): v for k, v in carry["counts"].items()}
    before = set(counts)
    ts = _values(rows, "ts", np.int64)
    if len(ts):
        uniq, cnt = np.unique(spec.memberships(ts), return_counts=True)
        for k, c in zip(uniq.tolist(), cnt.tolist()):
            counts[k] = counts.get(k, 0) + c
        first_k = first_window(spec, int(ts[0]))
        if carry["lo"] is None or first_k < carry["lo"]:
            carry["lo"] = first_k
    return _interval_windows(spec, counts, before, carry, watermark, final)


def first_window(spec: WindowSpec, ts: int) -> int:
    """The index of the first INTERVAL window holding time ``ts``."""
    return spec.first_window(ts)


def _interval_windows(spec: WindowSpec, counts: dict[int, int], before: set[int], carry: dict,
                      watermark: int | None, final: bool) -> tuple[Windows, dict]:
    """INTERVAL windows from row counts per window index (``before``: the indices already reported
    open). Batch mode calls this directly with counts Spark aggregated."""
    lo = carry["lo"]
    if lo is None:
        return NO_WINDOWS, carry
    # Windows k < close_hi are closed: their end k*step + offset + size is at or before the watermark.
    if final:
        close_hi = max(counts) + 1 if counts else lo
    elif watermark is None:
        close_hi = lo
    else:
        close_hi = max(lo, spec.first_window(watermark))
    if spec.keep_empty:
        closed_k = np.arange(lo, close_hi, dtype=np.int64)
    else:
        closed_k = np.array(sorted(k for k in counts if k < close_hi), dtype=np.int64)
    open_k = np.array(sorted(k for k in counts if k >= close_hi and k not in before), dtype=np.int64)
    all_k = np.concatenate([closed_k, open_k])
    if not len(all_k):  # nothing opened or closed (most calls of a live group): no frame to build
        return NO_WINDOWS, {**carry, "lo": int(close_hi), "counts": {str(k): v for k, v in counts.items()}}
    starts, ends = spec.window_starts(all_k), spec.window_ends(all_k)
    rows_out = np.fromiter((counts.get(k, 0) for k in all_k.tolist()), dtype=np.int64, count=len(all_k))
    closed = np.concatenate([np.ones(len(closed_k), bool), np.zeros(len(open_k), bool)])
    # a window is reported open once: when it first has rows, or (empty) together with its close
    opened = np.fromiter((k not in before for k in all_k.tolist()), dtype=bool, count=len(all_k))
    for k in closed_k.tolist():
        counts.pop(k, None)
    carry = {**carry, "lo": int(close_hi), "counts": {str(k): v for k, v in counts.items()}}
    return window_columns(starts, ends, rows_out, closed, opened), carry


def interval_windows(spec: WindowSpec, counts: dict[int, int], before: set[int], carry: dict,
                     watermark: int | None, final: bool) -> tuple[pd.DataFrame, dict]:
    """:func:`_interval_windows` as a frame: batch mode calls it with the counts Spark aggregated."""
    windows, carry = _interval_windows(spec, counts, before, carry, watermark, final)
    return windows.frame(), carry


def _segments(breaks: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Start and end (inclusive) row indices of the runs that ``breaks`` (True = new run) cut."""
    n = len(breaks)
    starts = np.flatnonzero(breaks)
    if n and (len(starts) == 0 or starts[0] != 0):
        starts = np.concatenate([[0], starts])
    ends = np.concatenate([starts[1:] - 1, [n - 1]]) if n else np.empty(0, np.int64)
    return starts.astype(np.int64), ends.astype(np.int64)


def _session(spec: WindowSpec, rows: Rows, carry: dict | None, watermark: int | None,
             final: bool, reported_only: bool = False) -> tuple[Windows, dict | None]:
    ts = _values(rows, "ts", np.int64)
    if len(ts) == 0:
        if carry and carry.get("open") and (
            final or (watermark is not None and watermark - carry["open"]["last"] > spec.gap)
        ):
            o = carry["open"]
            out = window_columns([o["start"]], [o["last"]], [o["count"]], [True], [False])
            return out, {**carry, "open": None}
        return NO_WINDOWS, carry
    o = (carry or {}).get("open")
    prev = np.concatenate([[o["last"]], ts[:-1]]) if o else np.concatenate([[ts[0]], ts[:-1]])
    breaks = (ts - prev) > spec.gap
    if not o:
        breaks[0] = True
    s_idx, e_idx = _segments(breaks)
    starts, ends = ts[s_idx], ts[e_idx]
    counts = e_idx - s_idx + 1
    opened = np.ones(len(s_idx), bool)
    if o and not breaks[0]:
        starts[0] = o["start"]
        counts[0] += o["count"]
        opened[0] = False
    elif o:  # the carried session ended before these rows
        starts = np.concatenate([[o["start"]], starts])
        ends = np.concatenate([[o["last"]], ends])
        counts = np.concatenate([[o["count"]], counts])
        opened = np.concatenate([[False], opened])
    closed = np.ones(len(starts), bool)
    last_open = not final and (watermark is None or watermark - ends[-1] <= spec.gap)
    closed[-1] = not last_open
    new_open = {"start": int(starts[-1]), "last": int(ends[-1]), "count": int(counts[-1])} if last_open else None
    if reported_only:
        keep = closed | opened
        starts, ends, counts, closed, opened = starts[keep], ends[keep], counts[keep], closed[keep], opened[keep]
    return window_columns(starts, ends, counts, closed, opened), {**(carry or {}), "open": new_open}


def _state(spec: WindowSpec, rows: Rows, carry: dict | None, watermark: int | None,
           final: bool, reported_only: bool = False) -> tuple[Windows, dict | None]:
    carry = dict(carry or {"open": None, "prev": None})
    o = carry.get("open")
    if o is not None:
        o = {**o, "state": state_key(o["state"]), "prev": state_key(o["prev"])}
    if spec.state_keys == 1:
        state = _values(rows, "_state") if len(rows) else np.empty(0, object)
        keep = ~pd.isna(state)
        ts = _values(rows, "ts", np.int64)[keep]
        values = state[keep]
        breaks = np.empty(len(values), dtype=bool)
        breaks[1:] = values[1:] != values[:-1]
        if len(ts):
            breaks[0] = o is None or json_safe(values[0]) != o["state"]

        def states_at(index: np.ndarray) -> np.ndarray:
            return json_safe_values(values[index])
    else:
        keys = [_values(rows, state_column(i)) if len(rows) else np.empty(0, object) for i in range(spec.state_keys)]
        ts, keys = state_rows(spec, _values(rows, "ts", np.int64), keys, carry, o, final)
        breaks = np.zeros(len(ts), dtype=bool)
        for values in keys:
            breaks[1:] |= values[1:] != values[:-1]
        if len(ts):
            breaks[0] = o is None or tuple(key_safe(values[0]) for values in keys) != o["state"]

        def states_at(index: np.ndarray) -> np.ndarray:
            columns = [key_values(values[index]) for values in keys]
            return np.fromiter(zip(*columns, strict=True), dtype=object, count=len(index))
    if len(ts) == 0:
        if o and final:
            return _close_only(spec, o, carry), {**carry, "open": None}
        return NO_WINDOWS, carry
    s_idx, e_idx = _segments(breaks)
    win_state = states_at(s_idx)
    starts, ends = ts[s_idx], ts[e_idx]
    counts = e_idx - s_idx + 1
    was_opened = np.zeros(len(s_idx), bool)
    new = np.ones(len(s_idx), bool)  # the window opens in this call
    prev_state = np.empty(len(s_idx), dtype=object)
    prev_state[1:] = win_state[:-1]
    prev_state[0] = state_key(carry.get("prev"))
    if o and not breaks[0]:
        starts[0] = o["start"]
        counts[0] += o["count"]
        was_opened[0] = o["opened"]
        prev_state[0] = o["prev"]
        new[0] = False
    elif o:  # the carried window closes at this chunk's first row
        starts = np.concatenate([[o["start"]], starts])
        ends = np.concatenate([[o["last"]], ends])
        counts = np.concatenate([[o["count"]], counts])
        was_opened = np.concatenate([[o["opened"]], was_opened])
        new = np.concatenate([[False], new])
        win_state = np.concatenate([_one(o["state"]), win_state])
        prev_state = np.concatenate([_one(o["prev"]), prev_state])
        prev_state[1] = o["state"]
    n = len(starts)
    lasts = ends.copy()  # each window's last row
    if spec.extend == 2:  # a new window starts a tick after the previous one's last row
        prev_last = carry.get("prev_last")
        before = np.concatenate([[0 if prev_last is None else prev_last], lasts[:-1]])
        reach = new.copy()
        reach[0] &= prev_last is not None
        starts[reach] = before[reach] + spec.tick
    elif spec.extend == 1 and n > 1:  # a closed window ends a tick before the next one's first row
        ends[:-1] = starts[1:] - spec.tick
    next_state = np.empty(n, dtype=object)
    next_state[:-1] = win_state[1:]
    closed = np.ones(n, bool)
    closed[-1] = final
    ok = spec.qualifies(ends - starts, counts)
    if spec.zeroth is not None:
        ok &= ~np.fromiter((spec.zeroth_of(v) for v in win_state.tolist()), dtype=bool, count=n)
    opened = ok & ~was_opened
    last = n - 1
    new_open = None if final else {
        "start": int(starts[last]), "last": int(lasts[last]), "count": int(counts[last]),
        "state": win_state[last], "prev": prev_state[last], "opened": bool(ok[last] or was_opened[last]),
    }
    report = ok | was_opened
    if not final:
        report[last] = opened[last]  # an open window is reported once, when it opens
    # the windows reported, before the frame is built (most calls of a live group report none)
    out = window_columns(starts[report], ends[report], counts[report], closed[report], opened[report],
                       prev_state=prev_state[report], cur_state=win_state[report], next_state=next_state[report])
    carry.update(open=new_open, prev=win_state[last] if final else carry.get("prev"))
    if final:
        carry["prev_last"] = int(lasts[last])
    elif n > 1:
        carry["prev"] = win_state[last - 1]
        carry["prev_last"] = int(lasts[last - 1])
    return out, carry


def _one(value: object) -> np.ndarray:
    """An object array of one value (a state of several keys stays one tuple)."""
    out = np.empty(1, dtype=object)
    out[0] = value
    return out


def _close_only(spec: WindowSpec, o: dict, carry: dict) -> Windows:
    if not (o["opened"] or spec.qualifies_one(o["last"] - o["start"], o["count"])):
        return NO_WINDOWS
    if spec.kind is TriggerKind.STATE_WINDOW and spec.zeroth_of(state_key(o["state"])):
        return NO_WINDOWS
    extra: dict[str, object] = {}
    if spec.kind is TriggerKind.STATE_WINDOW:
        extra = {"prev_state": _one(state_key(o["prev"])), "cur_state": _one(state_key(o["state"])),
                 "next_state": np.array([None], object)}
    if spec.kind is TriggerKind.EVENT_WINDOW:
        extra = {"open_index": [0], "open_fields": np.array([o["fields"]], object)}
    return window_columns([o["start"]], [o["last"]], [o["count"]], [True], [not o["opened"]], **extra)


def _event(spec: WindowSpec, rows: Rows, carry: dict | None, watermark: int | None,
           final: bool, reported_only: bool = False) -> tuple[Windows, dict | None]:
    carry = dict(carry or {"open": None})
    ts = _values(rows, "ts", np.int64)
    n = len(ts)
    start_at = np.flatnonzero(_flags(rows, "_start")) if n else np.empty(0, np.int64)
    end_at = np.flatnonzero(_flags(rows, "_end")) if n else np.empty(0, np.int64)
    out: dict[str, list] = {k: [] for k in ("s", "e", "c", "closed", "opened", "of", "cf")}
    start_fields = {name: _values(rows, f"_f_{name}") for name in spec.start_fields}
    end_fields = {name: _values(rows, f"_f_{name}") for name in spec.end_fields}
    if spec.conditions > 1:
        return _subevents(spec, rows, carry, final, ts, {**start_fields, **end_fields})
    if spec.start_limit is not None or spec.end_limit is not None:
        flags = (_flags(rows, "_start"), _flags(rows, "_end")) if n else (np.empty(0, bool), np.empty(0, bool))
        out, carry = event_streaks(spec, ts, *flags, carry, final)
        for held, fields, key in ((carry["open"], start_fields, "fields"), (carry["streak"], start_fields, "fields"),
                                  ((carry["open"] or {}).get("ending"), end_fields, "fields")):
            if held is not None and isinstance(held[key], int):  # a row of this call: its fields as JSON
                held[key] = _fields_json(fields, held[key])
        return _event_frame(out, start_fields, end_fields), carry
    o = carry.get("open")

    # the fields of the condition rows: JSON text (carried), a row index (made JSON at the end), or None
    def add(start: int, end: int, count: int, closed: bool, opened: bool, of: str | int, cf: int | None) -> None:
        for key, value in zip(out, (start, end, count, closed, opened, of, cf)):
            out[key].append(value)

    pos = 0
    if o is not None:
        k = np.searchsorted(end_at, 0)
        if k < len(end_at):
            e = int(end_at[k])
            count = o["count"] + e + 1
            ok = spec.qualifies_one(int(ts[e]) - o["start"], count)
            if ok or o["opened"]:
                add(o["start"], int(ts[e]), count, True, not o["opened"], o["fields"], e)
            o = None
            pos = e + 1
        elif n:
            o = {**o, "last": int(ts[-1]), "count": o["count"] + n}
            pos = n
    starts_list, ends_list, tsl = start_at.tolist(), end_at.tolist(), ts.tolist()
    si = bisect_left(starts_list, pos)
    while o is None and si < len(starts_list):  # the next window opens at the first start row after the last end
        s = starts_list[si]
        ei = bisect_left(ends_list, s)
        if ei == len(ends_list):
            o = {"start": tsl[s], "last": tsl[-1], "count": n - s, "fields": _fields_json(start_fields, s),
                 "opened": False}
            break
        e = ends_list[ei]
        if spec.qualifies_one(tsl[e] - tsl[s], e - s + 1):
            add(tsl[s], tsl[e], e - s + 1, True, True, s, e)
        si = bisect_left(starts_list, e + 1)
    if o is not None:
        if final:
            # a query reports only windows whose end condition was met
            o = None
        elif not o["opened"] and spec.qualifies_one(o["last"] - o["start"], o["count"]):
            o["opened"] = True
            add(o["start"], o["last"], o["count"], False, True, o["fields"], None)
    carry["open"] = o
    return _event_frame(out, start_fields, end_fields), carry


def _subevents(spec: WindowSpec, rows: Rows, carry: dict, final: bool, ts: np.ndarray,
               fields: dict[str, np.ndarray]) -> tuple[Windows, dict]:
    """:mod:`.subevents`: the windows, with their ordinal and condition indices."""
    n = len(ts)
    effective = _values(rows, "_cond", np.int64) if n else np.empty(0, np.int64)
    end_at = _flags(rows, "_end") if n else np.empty(0, bool)
    out, carry = event_subwindows(spec, ts, effective, end_at, carry, final)
    for held in (carry["open"], carry["sub"]):
        if held is not None and isinstance(held["fields"], int):  # a row of this call: its fields as JSON
            held["fields"] = _fields_json(fields, held["fields"])
    if not out["s"]:
        return NO_WINDOWS, carry
    return window_columns(out["s"], out["e"], out["c"], out["closed"], out["opened"], ordinal=out["o"],
                          open_index=np.asarray(out["oi"], np.int64),
                          open_fields=np.array(_fields_texts(fields, out["of"]), dtype=object),
                          close_index=np.asarray(out["ci"], np.int64),
                          close_fields=np.array(_fields_texts(fields, out["cf"]), dtype=object)), carry


def _event_frame(out: dict[str, list], start_fields: dict[str, np.ndarray],
                 end_fields: dict[str, np.ndarray]) -> Windows:
    size = len(out["s"])
    return window_columns(out["s"], out["e"], out["c"], out["closed"], out["opened"],
                          open_index=np.zeros(size, np.int64),
                          open_fields=np.array(_fields_texts(start_fields, out["of"]), dtype=object),
                          close_index=np.array([1 if c else -1 for c in out["closed"]], np.int64),
                          close_fields=np.array(_fields_texts(end_fields, out["cf"]), dtype=object))


def _count(spec: WindowSpec, rows: Rows, carry: dict | None, watermark: int | None,
           final: bool, reported_only: bool = False) -> tuple[Windows, dict | None]:
    size, step = spec.count, spec.count_sliding
    carry = dict(carry or {"total": 0, "open": []})
    valid = _flags(rows, "_valid") if "_valid" in rows else np.ones(len(rows), bool)
    ts = _values(rows, "ts", np.int64)[valid]
    before = carry["total"]
    total = before + len(ts)
    open_before: dict[int, int] = {int(j): s for j, s in carry["open"]}  # window ordinal -> start ts
    # windows whose first row is in this chunk
    first_new = -(-before // step)
    last_new = (total - 1) // step if total else -1
    new_j = np.arange(first_new, last_new + 1, dtype=np.int64)
    starts_of = dict(open_before)
    starts_of.update(zip(new_j.tolist(), ts[new_j * step - before].tolist()))
    # windows whose last row is in this chunk
    close_j = [j for j in sorted(starts_of) if before <= j * step + size - 1 < total]
    if final:
        close_j = sorted(starts_of)
    still_open = [j for j in sorted(starts_of) if j not in set(close_j)]
    js = np.array(close_j + still_open, dtype=np.int64)
    end_idx = np.minimum(js * step + size - 1, total - 1) - before
    last_ts = carry.get("last")
    ends = np.array([ts[i] if i >= 0 else last_ts for i in end_idx.tolist()], dtype=np.int64) if len(js) else \
        np.empty(0, np.int64)
    counts = np.minimum(js * step + size, total) - js * step
    closed = np.array([True] * len(close_j) + [False] * len(still_open), dtype=bool)
    opened = np.array([j not in open_before for j in js.tolist()], dtype=bool)
    report = closed | opened
    starts = np.array([starts_of[j] for j in js.tolist()], dtype=np.int64)
    frame = window_columns(starts[report], ends[report], counts[report], closed[report], opened[report],
                         ordinal=js[report])
    carry.update(total=int(total), open=[[int(j), int(starts_of[j])] for j in still_open],
                 last=int(ts[-1]) if len(ts) else last_ts)
    return frame, carry


def open_windows(spec: WindowSpec, carry: dict | None) -> pd.DataFrame:
    """The windows a carry holds open, as they stand: ``wend`` is the latest row so far (INTERVAL:
    the window's end), ``rows`` the rows so far. Neither closed nor newly opened."""
    if not carry:
        return empty_windows()
    if spec.kind is TriggerKind.INTERVAL:
        ks = np.array(sorted(int(k) for k in carry["counts"]), dtype=np.int64)
        rows = [carry["counts"][str(k)] for k in ks.tolist()]
        none = np.zeros(len(ks), bool)
        return window_frame(spec.window_starts(ks), spec.window_ends(ks), rows, none, none.copy())
    if spec.kind is TriggerKind.COUNT_WINDOW:
        js = np.array([j for j, _ in carry["open"]], dtype=np.int64)
        rows = np.minimum(js * spec.count_sliding + spec.count, carry["total"]) - js * spec.count_sliding
        return window_frame([s for _, s in carry["open"]], np.full(len(js), carry.get("last") or 0), rows,
                      np.zeros(len(js), bool), np.zeros(len(js), bool), ordinal=js)
    o = carry.get("open")
    if not o:
        return empty_windows()
    extra: dict[str, Any] = {}
    if spec.kind is TriggerKind.STATE_WINDOW:
        extra = {"prev_state": _one(state_key(o["prev"])), "cur_state": _one(state_key(o["state"]))}
    if spec.kind is TriggerKind.EVENT_WINDOW:
        extra = {"open_index": [0], "open_fields": np.array([o["fields"]], object)}
    return window_frame([o["start"]], [o["last"]], [o["count"]], [False], [False], **extra)


_SCANNERS = {TriggerKind.INTERVAL: _interval, TriggerKind.SESSION: _session, TriggerKind.STATE_WINDOW: _state,
             TriggerKind.EVENT_WINDOW: _event, TriggerKind.COUNT_WINDOW: _count}
