"""One group's batch in the live detector: its rows through the window core from its saved state
(:class:`Step`, 3.3.7 streams; :class:`LegacyStep`, streams of TDengine's engine before 3.3.7), the
state as the step sees it (:class:`GroupState`), and what a group is after a batch
(:class:`Advanced`).

The state is JSON text, kept per group in the checkpoint: the core's carry plus the rows not yet
behind the watermark, so it is bounded by open windows and the WATERMARK span, never by history.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import pandas as pd

from airflow_stream_provider.values import json_default
from airflow_stream_provider.windows.columns import Windows, window_columns
from airflow_stream_provider.windows.core import Chunk, open_windows, scan, scan_columns
from airflow_stream_provider.windows.events import EVENT_COLUMNS, empty_events
from airflow_stream_provider.windows.late import DATA_CHANGES, read_group, recalculate_group
from airflow_stream_provider.windows.legacy import LegacyGroup, as_micros
from airflow_stream_provider.windows.trigger_plan import TriggerPlan, micros


class GroupState:
    """One group's state as the step functions see it (the calls of Spark's ``GroupState`` they use)."""

    __slots__ = ("_value", "hasTimedOut", "timeout_ms", "removed")

    def __init__(self, value: str | None, *, timed_out: bool = False) -> None:
        self._value = value
        self.hasTimedOut = timed_out
        self.timeout_ms: int | None = None  # set again by every call that wants one
        self.removed = False

    @property
    def exists(self) -> bool:
        return self._value is not None

    @property
    def get(self) -> tuple[str]:
        assert self._value is not None, "no state"
        return (self._value,)

    def update(self, values: tuple) -> None:
        self._value, self.removed = values[0], False

    def remove(self) -> None:
        self._value, self.removed = None, True

    def setTimeoutDuration(self, ms: int) -> None:
        self.timeout_ms = int(ms)

    def saved(self, now_ms: int) -> list | None:
        """[state text, processing time of its timeout] as the checkpoint keeps it (None: removed)."""
        if self._value is None:
            return None
        return [self._value, now_ms + self.timeout_ms if self.timeout_ms is not None else None]


class Step:
    """One group's batch (3.3.7 streams): its rows through the window core, from its saved state.

    The state (JSON text) holds the core's ``carry``; ``pending``, the rows after the decided time
    that wait for the watermark (raw trigger-table values, ``ts`` in microseconds); ``decided``, the
    watermark of the last scan; ``max_ts`` and ``first_ts``, the latest and earliest event times
    scanned; ``due``, the next MAX_DELAY trigger of each open window (processing time); ``seen`` and
    ``idle``, when the group last received rows (processing time) and whether it is idle
    (IDLE_TIMEOUT); and the counters ``dropped`` and ``recalculations``.

    It returns windows, not events: the batch turns every group's windows into events at once
    (:func:`.events.batch_event_rows`), since building them group by group costs more than the scan.
    """

    def __init__(self, plan: TriggerPlan, *, timeouts: bool) -> None:
        self.plan = plan
        self.timeouts = timeouts

    def advance(self, key: tuple, raw: pd.DataFrame | None, text: str | None, now_ms: int) -> Advanced:
        """The group ``key`` after its new rows ``raw`` (None: its processing-time timeout is due)."""
        plan, spec, ts = self.plan, self.plan.spec, self.plan.ts_column
        saved = json.loads(text) if text is not None else {}
        carry, decided, max_ts, first_ts = (saved.get(k) for k in ("carry", "decided", "max_ts", "first_ts"))
        pending = _from_records(saved.get("pending"))
        parts: list[tuple[str, pd.DataFrame]] = []
        if raw is not None and len(raw):
            # a group of a live batch has a row or a few: numpy masks, and no frame built that is not
            # needed, keep the step at a fraction of a millisecond (it runs once per group and batch)
            times = micros(raw[ts])
            raw[ts] = times
            data, late, drop, max_ts = sort_rows(plan, raw, times, decided, max_ts)
            if (drop & data).any():
                saved["dropped"] = saved.get("dropped", 0) + int((drop & data).sum())
            if late.any() or drop.any():
                changes, live = raw[late & ~drop], raw[~late & ~drop]
            else:  # the usual batch: every row new and in time
                changes, live = None, raw
            if changes is not None and len(changes):
                assert decided is not None  # rows count as late only once a watermark was decided
                done = recalculate_group(plan, tuple(key), changes, version=int(raw["_commit_version"].max()),
                                   decided=decided, first_ts=first_ts)
                parts += [("invalidate", done.invalidate), ("windows", done.windows)]
                carry = done.carry
                low = int(changes[ts].min())
                first_ts = low if first_ts is None else min(first_ts, low)
                saved["recalculations"] = saved.get("recalculations", 0) + 1
            pending = _merge(plan, pending, live)
            watermark = max_ts - spec.watermark if max_ts is not None else None
            if watermark is not None:
                waiting = pending[ts].to_numpy(np.int64)
                due = waiting <= watermark
                if due.all():  # no WATERMARK: every row is ready at once
                    ready, pending = pending, None
                else:
                    ready, pending = pending[due], pending[~due]
                windows, carry = scan(spec, plan.prepare(ready), carry, watermark=watermark, reported_only=True)
                parts.append(("windows", windows))
                if due.any():
                    low = int(waiting[due].min())
                    first_ts = low if first_ts is None else min(first_ts, low)
                decided = watermark
        timeout = None
        if plan.max_delay is not None:
            delayed, timeout = self._max_delay(saved, carry, now_ms * 1000)
            parts.append(("delayed", delayed))
        if plan.idle_timeout is not None:
            timeout = self._idle(saved, raw is not None and len(raw) > 0, now_ms * 1000, parts, timeout)
        saved.update(carry=carry, decided=decided, max_ts=max_ts, first_ts=first_ts,
                     pending=_records(pending, plan.columns))
        return Advanced(json.dumps(saved, default=json_default), timeout, [(k, w) for k, w in parts if len(w)])

    def ready(self, rows: Chunk, low: int, high: int, text: str | None, now_ms: int) -> Advanced | None:
        """:meth:`advance` for a group whose batch is new rows in time order (``rows`` prepared,
        ``low`` and ``high`` the times of the first and last raw row), without WATERMARK (every row
        is ready at once); None when its state asks for the general road (rows waiting, or rows at
        or before what it decided: late)."""
        saved = json.loads(text) if text is not None else {}
        decided = saved.get("decided")
        if saved.get("pending") or (decided is not None and low <= decided):
            return None
        carry, max_ts, first_ts = saved.get("carry"), saved.get("max_ts"), saved.get("first_ts")
        max_ts = high if max_ts is None else max(max_ts, high)
        first_ts = low if first_ts is None else min(first_ts, low)
        windows, carry = scan_columns(self.plan.spec, rows, carry, watermark=max_ts, reported_only=True)
        parts: list[tuple[str, pd.DataFrame | Windows]] = [("windows", windows)]
        timeout = None
        if self.plan.max_delay is not None:
            delayed, timeout = self._max_delay(saved, carry, now_ms * 1000)
            parts.append(("delayed", delayed))
        if self.plan.idle_timeout is not None:
            timeout = self._idle(saved, True, now_ms * 1000, parts, timeout)
        saved.update(carry=carry, decided=max_ts, max_ts=max_ts, first_ts=first_ts, pending=None)
        return Advanced(json.dumps(saved, default=json_default), timeout, [(k, w) for k, w in parts if len(w)],
                        decided=max_ts, counted=int((carry or {}).get("total", 0)))

    def _max_delay(self, saved: dict, carry: dict | None, now: int) -> tuple[pd.DataFrame, int | None]:
        """The open windows due for another MAX_DELAY trigger at ``now`` (microseconds), and the
        milliseconds to the next one (None: no window open)."""
        delay = self.plan.max_delay
        assert delay is not None  # called only for a plan with MAX_DELAY
        windows = open_windows(self.plan.spec, carry)
        due_before, due, fire = saved.get("due", {}), {}, []
        for i, (start_ts, ordinal) in enumerate(zip(windows["wstart"].tolist(), windows["ordinal"].tolist())):
            name = f"{start_ts}:{ordinal}"
            at = due_before.get(name, now + delay)  # the first trigger comes a delay after the window is seen
            if now >= at:
                fire.append(i)
                at += (now - at) // delay * delay + delay  # triggers missed while busy are skipped
            due[name] = at
        saved["due"] = due
        timeout = max(1, (min(due.values()) - now) // 1000) if due and self.timeouts else None
        return windows.iloc[fire], timeout

    def _idle(self, saved: dict, received: bool, now: int, parts: list, timeout: int | None) -> int | None:
        """IDLE_TIMEOUT at ``now`` (processing time, microseconds), ``received``: the group has rows in
        this batch. A group that received none for the timeout fires IDLE once; its next rows fire
        RESUME, with the same span start (the last rows before it was idle), so the same trigger id.
        Rows that come after the timeout passed unseen (the detector was busy or stopped) fire both.
        Appends the events to ``parts``; the milliseconds to the next timeout, the sooner of
        ``timeout`` and the group's going idle."""
        limit = self.plan.idle_timeout
        assert limit is not None  # called only for a plan with IDLE_TIMEOUT
        seen, idle = saved.get("seen"), bool(saved.get("idle"))
        if seen is not None and not idle and now >= seen + limit:
            parts.append(("idle", idle_span(seen, now)))
            idle = True
        if received:
            if idle and seen is not None:
                parts.append(("resume", idle_span(seen, now)))
                idle = False
            seen = now
        saved["seen"], saved["idle"] = seen, idle
        if idle or seen is None or not self.timeouts:
            return timeout
        due = max(1, -(-(seen + limit - now) // 1000))
        return due if timeout is None else min(timeout, due)


def idle_span(start: int, end: int) -> Windows:
    """An IDLE or RESUME event's span in the window columns the events read: from the group's last rows
    to the event, processing time in microseconds (``ordinal`` -1: never a window's trigger id)."""
    return window_columns([start], [end], [0], [False], [False], ordinal=[-1])


def sort_rows(plan: TriggerPlan, raw: pd.DataFrame, times: np.ndarray, decided: int | None,
              max_ts: int | None) -> tuple[np.ndarray, np.ndarray, np.ndarray, int | None]:
    """A group's new rows ``raw`` (event ``times`` in microseconds) sorted out against its state:
    which carry data (not a delete), which are late (at or before the ``decided`` time), which are
    dropped (expired, or late where the stream does not recalculate), and the latest event time seen
    with them (from ``max_ts``)."""
    data = np.isin(raw["_change_type"].to_numpy(object), DATA_CHANGES)
    written_before = max_ts
    if data.any():
        top = int(times[data].max())
        max_ts = top if max_ts is None else max(max_ts, top)
    late = times <= decided if decided is not None else np.zeros(len(times), bool)
    drop = np.zeros(len(times), bool)
    if plan.expired_time is not None:
        drop |= expired(times, raw["_commit_version"].to_numpy(np.int64), data, written_before, plan.expired_time)
    if not plan.recalculates:
        drop |= late
    return data, late, drop, max_ts


def expired(times: np.ndarray, versions: np.ndarray, data: np.ndarray, before: int | None,
            expired_time: int) -> np.ndarray:
    """Which rows are expired (reference 000, "Expired Data"): older than the latest event time
    written before their own write (commit ``versions``; ``before``, the latest of earlier batches),
    minus ``expired_time``. Rows of one write never expire each other, so rows written in event-time
    order never expire."""
    order, write = np.unique(versions, return_inverse=True)
    none = np.iinfo(np.int64).min
    latest = np.full(len(order), none, np.int64)
    np.maximum.at(latest, write[data], times[data])
    prior = np.concatenate(([none if before is None else before], np.maximum.accumulate(latest)[:-1]))
    if before is not None:
        prior = np.maximum(prior, before)
    return times + expired_time < prior[write]  # never below ``none``: nothing written before


@dataclass(frozen=True)
class Advanced:
    """A group after a batch: its state text, the milliseconds to its next processing-time timeout
    (None: none), and the windows to report, each with what it is (``windows``: opened or closed;
    ``invalidate``: no longer valid; ``delayed``: due for MAX_DELAY)."""

    state: str
    timeout_ms: int | None
    parts: list[tuple[str, pd.DataFrame | Windows]]
    decided: int | None = None  # the event time the group decided up to, when known without its state
    counted: int = 0  # COUNT_WINDOW: the group's rows counted so far


class LegacyStep:
    """The per-group state function of a stream of TDengine's engine before 3.3.7: its state is
    :meth:`.legacy.LegacyGroup.state`, its rows are read back from the trigger table by delta-rs."""

    def __init__(self, plan: TriggerPlan, *, timeouts: bool) -> None:
        self.plan = plan
        self.timeouts = timeouts

    def __call__(self, key: tuple, chunks: Iterator[pd.DataFrame], state) -> Iterator[pd.DataFrame]:
        plan = self.plan
        saved = json.loads(state.get[0]) if state.exists else {}
        values = tuple(key) if plan.keys else ()

        def read(version: int, lo: int, hi: int) -> pd.DataFrame:
            return as_micros(read_group(plan, values, version, lo, hi))

        group = LegacyGroup(plan, values, saved, read, now=time.time_ns() // 1000)
        frames = [] if state.hasTimedOut else [f for f in chunks if len(f)]
        if frames:
            group.apply(as_micros(pd.concat(frames, ignore_index=True)))
        group.emit()
        state.update((json.dumps(group.state(), default=json_default),))
        timeout = group.next_timeout() if self.timeouts else None
        if timeout is not None:
            state.setTimeoutDuration(max(1, timeout // 1000))
        events = group.all_events()
        yield events[list(EVENT_COLUMNS)] if events is not None else empty_events()


def _merge(plan: TriggerPlan, pending: pd.DataFrame | None, changes: pd.DataFrame) -> pd.DataFrame:
    """Pending rows with ``changes`` (not late) applied: the last value of each row wins, and a
    delete removes the row."""
    if pending is None and bool(np.all(changes["_change_type"].to_numpy(object) == "insert")):
        times = changes[plan.ts_column].to_numpy()
        rising = bool(np.all(times[1:] > times[:-1]))  # rows written in time order: distinct at a glance
        if rising or len(np.unique(times)) == len(times):  # new rows with distinct times: nothing to merge
            # as they came, with their change columns (the state keeps only the plan's columns)
            return changes if _plain_index(changes) else changes.reset_index(drop=True)
    frames = [changes]
    if pending is not None:
        frames.insert(0, pending.assign(_change_type="insert", _commit_version=-1))
    rows = pd.concat(frames, ignore_index=True)
    rows = rows[rows["_change_type"] != "update_preimage"]
    rows = rows.sort_values("_commit_version", kind="stable").drop_duplicates(list(plan.row_key), keep="last")
    return rows.loc[rows["_change_type"] != "delete", list(plan.columns)].reset_index(drop=True)


def _plain_index(frame: pd.DataFrame) -> bool:
    index = frame.index
    return isinstance(index, pd.RangeIndex) and index.start == 0 and index.step == 1


def _records(frame: pd.DataFrame | None, columns: tuple[str, ...]) -> dict | None:
    if frame is None or frame.empty:
        return None
    return {c: [v.item() if hasattr(v, "item") else v for v in frame[c].tolist()] for c in columns}


def _from_records(records: dict | None) -> pd.DataFrame | None:
    return pd.DataFrame(records) if records else None
