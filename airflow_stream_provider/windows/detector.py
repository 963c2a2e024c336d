"""The live detector: a stream's windows, found batch by batch in its trigger table's Delta change
feed, in the process that hosts it (the stream node, or a task catching up).

Each batch reads the versions committed since the last one (:class:`.changes.ChangeFeed`, shared by
the streams on one table), keeps the change kinds the stream reads, groups the rows by the PARTITION
BY keys and runs the window core group by group (:class:`_Step`). The per-group state is the core's
carry plus the rows not yet behind the watermark, so it is bounded by open windows and the WATERMARK
span, never by history. A batch's events go to the stream's event table in one commit that records
(app id, batch id) as a Delta transaction, so a batch replayed after a crash is written once; its
state and then its commit go to the checkpoint (:mod:`.checkpoint`), whose ``commits/N`` the sensors
watch.

Batches are as large as the work waiting: a stream that keeps up reads each commit as it lands (the
feed looks for one every few tens of milliseconds), one that fell behind reads everything since in
one batch. Nothing here runs a Spark job: a commit of a hundred rows is detected in milliseconds.

Time semantics (reference 000, "Atypical Data Ingestion Scenarios"):

- A row is *late* when its time is at or before the group's decided time, the watermark of its
  last scan. Late rows, and updates of rows already scanned, are recalculated
  (:mod:`.late`): changed windows, and closed windows holding a changed row even when their
  bounds and count stand (an update of a value), get ``WINDOW_INVALIDATION`` and a recomputed
  ``WINDOW_CLOSE`` with the same trigger id. Under IGNORE_DISORDER, and always for COUNT_WINDOW,
  they are dropped and counted in the group's state (``dropped``).
- Deletes are read only under DELETE_RECALC, and recalculated like late rows.
- Rows older than the latest event time minus EXPIRED_TIME are dropped and counted.
- MAX_DELAY: every MAX_DELAY of processing time a window stays open, a ``MAX_DELAY`` event
  reports it as it stands (a processing-time timeout fires it when no rows come).
- FILL_HISTORY[_FIRST]: the first batch reads the table as it is (its snapshot), the next ones the
  changes after it, so history is complete before any live row is processed.
"""

from __future__ import annotations

import collections
import contextlib
import hashlib
import heapq
import itertools
import json
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from airflow_stream_provider.model import TriggerMode
from airflow_stream_provider.model.events import EventType
from airflow_stream_provider.storage import is_remote
from airflow_stream_provider.warehouse import writer
from airflow_stream_provider.windows.changes import ChangeFeed
from airflow_stream_provider.windows.checkpoint import RETAIN, SNAPSHOT_EVERY, Checkpoint
from airflow_stream_provider.windows.core import Chunk, Windows, concat_windows, open_windows, plain, scan, scan_columns
from airflow_stream_provider.windows.events import (
    EVENT_COLUMNS,
    EVENT_FIELDS,
    batch_event_rows,
    empty_events,
)
from airflow_stream_provider.windows.late import DATA_CHANGES, _stamp, read_group, recalculate
from airflow_stream_provider.windows.legacy import LegacyGroup, as_micros
from airflow_stream_provider.windows.trigger_plan import TriggerPlan, micros

#: a batch reads at most this many versions (a stream far behind catches up in several)
MAX_VERSIONS = 2000
#: a live batch whose rows can close no window is held, and read with the next versions, for at most
#: this many versions (:meth:`Detector.can_hold`)
HOLD_VERSIONS = 60


@dataclass(frozen=True)
class DetectorOptions:
    """Where a detector keeps its things and where in the table's history it starts."""

    events_path: str
    checkpoint: str
    # where the change feed starts: a Delta version, or "latest" (the version when the checkpoint is
    # made: only later commits are read); FILL_HISTORY plans start from the table's snapshot instead
    starting_version: int | str = "latest"
    # the table's version when the stream was created: changes up to it are history, and are read
    # only with FILL_HISTORY
    created_version: int | None = None
    max_files_per_trigger: int | None = None  # admission limit per batch, in data files (whole versions)
    # inclusive ranges of table versions never read (written while the stream was stopped, then
    # started with IGNORE UNTREATED)
    skip_versions: tuple[tuple[int, int], ...] = ()


def waits(plan: TriggerPlan) -> bool:
    """Whether the detector has something to do when no rows come: MAX_DELAY, or a legacy stream's
    MAX_DELAY, CONTINUOUS_WINDOW_CLOSE recalculation and FORCE_WINDOW_CLOSE windows."""
    legacy = plan.legacy
    return plan.max_delay is not None or (legacy is not None and (
        legacy.max_delay is not None or legacy.recalculate is not None
        or legacy.mode == TriggerMode.FORCE_WINDOW_CLOSE))


@dataclass(frozen=True)
class BatchReport:
    """What one batch did, as the node reports a detector's progress."""

    batch_id: int
    first_version: int | None
    last_version: int | None
    rows: int
    groups: int
    events: int
    seconds: float
    at: float  # when it ended, epoch seconds

    def progress(self) -> dict:
        """In the shape of a Structured Streaming query's progress, which status pages read."""
        return {"batchId": self.batch_id, "numInputRows": self.rows, "events": self.events,
                "groups": self.groups, "versions": [self.first_version, self.last_version],
                "durationMs": round(self.seconds * 1000, 1),
                "processedRowsPerSecond": round(self.rows / self.seconds, 1) if self.seconds > 0 else None,
                "timestamp": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(self.at)) + "Z"}


@dataclass(frozen=True)
class DetectedBatch:
    """A batch as the detector hands it on: its id, its events as stored in the event table (None:
    it found none), and the trigger table's version it read up to. ``store_events``, when set: the
    events are not in the event table yet, and this puts them there (once, whoever calls it first)
    for a caller that reads the table."""

    id: int
    events: pa.Table | None
    version: int | None
    store_events: Callable[[], None] | None = None


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


def _key_text(key: tuple) -> str:
    return json.dumps([plain(v) for v in key], default=str)


def group_codes(table: pa.Table, keys: tuple[str, ...]) -> tuple[np.ndarray, list[tuple]]:
    """Each row's group (a number) and each group's PARTITION BY values, numbered in the order the
    groups first appear. The values come from Arrow as they are, so an integer key stays an integer
    where pandas would make a column with NULLs floating point (and the group another id); a time
    is its microseconds, as batch mode gives it."""
    if not keys:
        return np.zeros(table.num_rows, np.int64), [(0,)]
    codes = np.zeros(table.num_rows, np.int64)
    values: list[list] = []
    for name in keys:
        column = table[name]
        if pa.types.is_timestamp(column.type):
            column = column.cast(pa.timestamp("us", tz=column.type.tz)).cast(pa.int64())
        encoded = pc.dictionary_encode(column, null_encoding="encode").combine_chunks()
        dictionary = encoded.dictionary.to_pylist()
        codes = codes * len(dictionary) + encoded.indices.to_numpy(zero_copy_only=False).astype(np.int64)
        values.append(dictionary)
    unique, first, codes = np.unique(codes, return_index=True, return_inverse=True)
    rank = np.argsort(np.argsort(first, kind="stable"), kind="stable")  # numbered by first appearance
    codes = rank[codes]
    sizes = [len(v) for v in values]
    key_values: list[tuple] = [()] * len(unique)
    for i, combined in enumerate(unique.tolist()):
        parts = []
        for size in reversed(sizes):
            combined, index = divmod(combined, size)
            parts.append(index)
        key_values[rank[i]] = tuple(v[j] for v, j in zip(values, reversed(parts), strict=True))
    return codes.astype(np.int64), key_values


def group_slices(rows: pd.DataFrame, codes: np.ndarray, groups: int) -> Callable[[int], pd.DataFrame]:
    """Group ``g``'s rows of ``rows`` (``codes``: each row's group, as :func:`group_codes` numbers
    them), in their order, each made only when asked for; the rows are sorted once."""
    order = np.argsort(codes, kind="stable")
    bounds = np.searchsorted(codes[order], np.arange(groups + 1))
    return lambda g: rows.iloc[order[bounds[g]:bounds[g + 1]]].reset_index(drop=True)


class Detector:
    """The windows of one stream, batch by batch over its trigger table's change feed.

    :param feed: the table's feed, shared with the other streams on it (default: one of its own).
    :param timeouts: fire processing-time timeouts (MAX_DELAY) without new rows.
    :param after_batch: called with each :class:`DetectedBatch`, once its events and state are
        written and before the batch is committed. If it raises, the batch is not committed, and
        runs again, with the same versions, when the detector starts again; its events are not
        written twice.
    :param results_first: ``after_batch`` computes and writes the batch's results
        (LOW_LATENCY_CALC): it is called before the events and the state are written, and what the
        batch does after it (the event table's commit, the state, the checkpoint's commit) reports no
        window, so it waits behind the batches of the process that do (:meth:`Turns.step_back`).
        The batch's results are then written before its events; a batch that did not commit runs
        again all the same, and writes its events then.
    """

    def __init__(self, plan: TriggerPlan, options: DetectorOptions, *, feed: ChangeFeed | None = None,
                 timeouts: bool = True, after_batch: Callable[[DetectedBatch], None] | None = None,
                 results_first: bool = False) -> None:
        self.plan = plan
        self.options = options
        self.feed = feed or ChangeFeed(plan.path)
        self.timeouts = timeouts and waits(plan)
        self.step = (_LegacyStep if plan.legacy is not None else _Step)(plan, timeouts=self.timeouts)
        self.after_batch = after_batch
        self.results_first = results_first and after_batch is not None
        place = options.checkpoint if is_remote(options.checkpoint) else Path(options.checkpoint).resolve()
        self.app_id = "airflow-stream-detector-" + hashlib.sha1(f"{plan.stream}\x1f{place}".encode()).hexdigest()[:16]
        self.checkpoint = Checkpoint(options.checkpoint)
        # the last version before the feed: the table as the stream was created, or as it is now
        after: int | None
        if options.created_version is not None:
            after = options.created_version
        elif options.starting_version == "latest":
            after = self.feed.latest()
        else:  # the feed starts at this version: it is the first read
            after = int(options.starting_version) - 1
        found = self.checkpoint.recover(None if plan.history else after)
        self.id = found.id
        self.batch = found.committed
        self.position = found.position if found.position is not None else (None if plan.history else found.after)
        self.groups = found.groups
        self.planned = found.planned
        self.snapshot = found.snapshot
        self.last: BatchReport | None = None
        # batches since the last one that reported windows, and between the last two that did
        self._quiet, self._period = 0, 1
        self._reported = 0  # the events of the last batch that reported any
        self.held: int | None = None  # the last version of a batch held (:meth:`can_hold`), read again next
        self._latest: int | None = None  # the table's latest version when the last batch was planned
        # each group's event time decided and rows counted, as its state says, where known; and as the
        # last scan left them
        self._known: dict[str, tuple[int, int]] = {}
        self._known_now: dict[str, tuple[int, int]] = {}
        self._texts: dict[tuple, str] = {}  # each group's key as its state is stored under

    # --- planning --------------------------------------------------------------------------------

    def _next_offset(self, now_ms: int) -> dict | None:
        """The versions the next batch reads, or None when there is nothing to do."""
        if self.planned is not None:
            return self.planned
        latest = self.feed.latest()
        if self.position is None and self.plan.history:  # FILL_HISTORY: the table as it is, first
            if latest is None:
                return None
            return {"first": None, "last": latest, "snapshot": latest, "at_ms": now_ms}
        after = -1 if self.position is None else self.position
        self._latest = latest
        if latest is not None and latest > max(after, -1 if self.held is None else self.held):
            last = min(latest, after + MAX_VERSIONS)
            if self.options.max_files_per_trigger:
                files, last = 0, after
                while last < latest:
                    files += self.feed.files(last + 1)
                    if last > after and files > self.options.max_files_per_trigger:
                        break
                    last += 1
            return {"first": after + 1, "last": last, "at_ms": now_ms}
        if self.timeouts and self._due(now_ms):
            return {"first": None, "last": self.position, "at_ms": now_ms}
        return None

    def _due(self, now_ms: int) -> bool:
        return any(due is not None and due <= now_ms for _, due in self.groups.values())

    def expects_windows(self) -> bool:
        """Whether the next batch is expected to report windows: the stream has reported in every
        batch, or as many batches have passed since it last did as passed between its last two
        reports (a COUNT_WINDOW(10) stream fed every second reports every tenth batch). Only the
        order of turns (:class:`Turns`) depends on it."""
        return self._quiet + 1 >= self._period

    def expected_events(self) -> int:
        """How many events the next batch is expected to report, when it is expected to report any
        (:meth:`expects_windows`): as many as the last batch that reported some. Only the order of
        turns (:class:`Turns`) depends on it."""
        return self._reported

    def waits_after(self) -> int | None:
        """The version a new batch needs one after: the last one read (held, or the batch's)."""
        return self.position if self.held is None else max(self.held, -1 if self.position is None else self.position)

    def can_hold(self, offset: dict, rows: pd.DataFrame) -> bool:
        """Whether the batch of ``offset`` and its ``rows`` can wait for the next versions: its rows
        can close no window, and nothing but closed windows is reported. Then it is held: not run,
        its versions read again with the next ones (at most :data:`HOLD_VERSIONS`), and when it runs
        its events are those it would have had, its windows found a batch later. A batch that does
        not reach the table's latest version is never held: the next versions are there already.

        An INTERVAL(10s) or COUNT_WINDOW(10) stream fed every second closes windows every tenth
        second; in the others it would scan every group and commit their state for nothing. Held
        are the batches of new rows only, each after every row its group decided before (no late
        row, update or delete), of a stream that reports window closes only (not their opening),
        without WATERMARK, EXPIRED_TIME or MAX_DELAY, whose groups' state is known: INTERVAL, where a
        group's windows (empty ones too) close at the first window end its rows reach; COUNT_WINDOW
        counting every row (no PRE_FILTER or trigger columns), where a window closes at its last row."""
        plan = self.plan
        spec = plan.spec
        counting = spec.kind == "count" and not plan.pre_filter and not plan.count_columns
        if (not isinstance(self.step, _Step) or not (spec.kind == "interval" or counting) or spec.watermark
                or plan.expired_time is not None or plan.max_delay is not None
                or set(plan.event_types) != {EventType.WINDOW_CLOSE} or offset.get("first") is None
                or offset.get("snapshot") is not None or self.position is None
                or int(offset["last"]) - self.position > HOLD_VERSIONS or self._due(int(offset["at_ms"]))
                or int(offset["last"]) != self._latest):  # (more to read now: MAX_FILES_PER_TRIGGER)
            return False
        if not bool(np.all(rows["_change_type"].to_numpy(object) == "insert")):
            return False
        if not pd.api.types.is_integer_dtype(rows[plan.ts_column].dtype):  # a time that is a key too
            return False
        codes, key_values = rows.attrs["groups"]
        known = np.empty((len(key_values), 2), np.int64)  # each group's decided time and rows counted
        for g, key in enumerate(key_values):
            found = self._known.get(self._text_of(key))
            if found is None:
                return False
            known[g] = found
        decided, total = known[:, 0], known[:, 1]
        ts = rows[plan.ts_column].to_numpy(np.int64)
        low = np.full(len(key_values), np.iinfo(np.int64).max)
        high = np.full(len(key_values), np.iinfo(np.int64).min)
        np.minimum.at(low, codes, ts)
        np.maximum.at(high, codes, ts)
        if not bool(np.all(low > decided)):
            return False
        if spec.kind == "interval":
            # the first window end after what each group decided: a window closes when its end is reached
            reach = spec.offset + spec.interval  # window k ends at k * sliding + reach
            return bool(np.all(high < ((decided - reach) // spec.sliding + 1) * spec.sliding + reach))
        # window j holds rows j * sliding ... j * sliding + count - 1 of its group: it closes at the last
        last = spec.count - 1
        closes_at = last + np.maximum(0, -(-(total - last) // spec.count_sliding)) * spec.count_sliding
        return bool(np.all(total + np.bincount(codes, minlength=len(key_values)) - 1 < closes_at))

    def _text_of(self, key: tuple) -> str:
        """The text a group's state is kept under, made once per key (every batch names its groups)."""
        text = self._texts.get(key)
        if text is None:
            text = self._texts[key] = _key_text(key)
        return text

    def next_timeout(self) -> float | None:
        """Epoch seconds of the earliest processing-time timeout (None: none set)."""
        dues = [due for _, due in self.groups.values() if due is not None] if self.timeouts else []
        return min(dues) / 1000 if dues else None

    # --- running ---------------------------------------------------------------------------------

    def run_once(self) -> BatchReport | None:
        """Run the next batch if there is one; what it did (None: nothing to do)."""
        began = time.monotonic()
        offset = self._next_offset(int(time.time() * 1000))
        if offset is None:
            return None
        batch = self.batch + 1
        rows = self._rows(offset)
        if self.planned is None:
            if rows is not None and self.can_hold(offset, rows):
                self.held = int(offset["last"])
                return None
            if rows is None and offset["first"] is not None and not self._due(int(offset["at_ms"])):
                # versions that changed no row the stream reads (the table's creation, a compaction,
                # another subtable's rows): passed without a batch, and read again after a restart
                self.position = offset["last"]
                return self.run_once()
            self.checkpoint.plan(batch, offset)
            self.planned = offset
        events, changed, groups = self._scan(rows, int(offset["at_ms"]))
        written = event_table(events, batch, offset["at_ms"])
        count = 0 if written is None else written.num_rows
        stored = written is None

        def store_events() -> None:
            nonlocal stored
            if not stored:
                assert written is not None
                _commit_arrow(written, self.options.events_path, self.app_id, batch)
                stored = True

        if self.results_first:
            assert self.after_batch is not None
            self.after_batch(DetectedBatch(batch, written, offset["last"], None if stored else store_events))
            if count:
                step_back()
        store_events()
        merged = dict(self.groups)
        for key, value in changed.items():
            if value is None:
                merged.pop(key, None)
            else:
                merged[key] = value
        snapshot = batch - self.snapshot >= SNAPSHOT_EVERY
        self.checkpoint.save(batch, changed, merged if snapshot else None)
        if count:
            self.checkpoint.mark_events(batch)
        if self.after_batch is not None and not self.results_first:
            self.after_batch(DetectedBatch(batch, written, offset["last"]))
        self.checkpoint.commit(batch, count)
        self.batch, self.groups, self.planned, self.held = batch, merged, None, None
        for key, value in changed.items():
            if value is None or key not in self._known_now:
                self._known.pop(key, None)
            else:
                self._known[key] = self._known_now[key]
        if count:
            self._quiet, self._period, self._reported = 0, self._quiet + 1, count
        else:
            self._quiet += 1
        if offset.get("snapshot") is not None or offset["first"] is not None:
            self.position = offset["last"]
        if snapshot:
            self.snapshot = batch
            self.checkpoint.prune(batch - RETAIN)
        self.last = BatchReport(batch, offset.get("first"), offset["last"], 0 if rows is None else len(rows),
                                groups, count, time.monotonic() - began, time.time())
        return self.last

    def run_available(self) -> int:
        """Run batches until the table as it is now is read (and no timeout is due); how many ran."""
        ran = 0
        while self.run_once() is not None:
            ran += 1
        return ran

    def _rows(self, offset: dict) -> pd.DataFrame | None:
        """The batch's raw rows: the plan's columns, ``_change_type`` and ``_commit_version``, the
        timestamp in microseconds (unless it is a key)."""
        plan = self.plan
        if offset.get("snapshot") is not None:
            version = int(offset["snapshot"])
            table = self.feed.snapshot(version, list(plan.columns))
            table = table.append_column("_change_type", pa.array(["insert"] * table.num_rows, pa.string()))
            table = table.append_column("_commit_version", pa.array(np.full(table.num_rows, version, np.int64)))
        elif offset["first"] is None:
            return None
        else:
            table = self.feed.changes(int(offset["first"]), int(offset["last"]))
            if table is None:
                return None
            kinds = [*DATA_CHANGES, "update_preimage"] + (["delete"] if plan.reads_deletes else [])
            keep = pc.is_in(table["_change_type"], value_set=pa.array(kinds))
            for lo, hi in self.options.skip_versions:
                version = table["_commit_version"]
                keep = pc.and_(keep, pc.invert(pc.and_(pc.greater_equal(version, lo), pc.less_equal(version, hi))))
            if not pc.all(keep).as_py():  # (all kept: the feed's own table, whose frame the streams share)
                table = table.filter(keep)
        if plan.subtable is not None:
            table = table.filter(pc.equal(table["tbname"], plan.subtable))
        if plan.since is not None:
            ts = table[plan.ts_column]
            table = table.filter(pc.greater_equal(ts, _stamp(plan.since, ts.type)))
        if not table.num_rows:
            return None
        frame, groups = _frame(table, plan)
        frame.attrs["groups"] = groups
        return frame

    def _scan(self, rows: pd.DataFrame | None, now_ms: int) -> tuple[list[pd.DataFrame], dict[str, list | None], int]:
        """Each group's rows through the step, and the groups whose timeout is due: their events,
        their new state, and how many groups ran."""
        keys = list(self.plan.keys)
        work: list[tuple[str, tuple, int | None]] = []  # key text, key, group (None: its timeout is due)
        codes = np.zeros(0, np.int64)
        parts: Callable[[int], pd.DataFrame] = lambda g: rows  # noqa: E731 (one group: all the rows)
        if rows is not None:
            codes, key_values = rows.attrs.pop("groups")
            if len(key_values) > 1:  # a group's raw rows, made only for the general road
                parts = group_slices(rows, codes, len(key_values))
            work = [(self._text_of(key), key, g) for g, key in enumerate(key_values)]
        if self.timeouts:
            touched = {text for text, _, _ in work}
            work += [(text, tuple(json.loads(text)), None) for text, (_, due) in self.groups.items()
                     if due is not None and due <= now_ms and text not in touched]
        changed: dict[str, list | None] = {}
        self._known_now = {}
        if isinstance(self.step, _LegacyStep):
            events: list[pd.DataFrame] = []
            for text, key, group in work:
                saved = self.groups.get(text)
                state = GroupState(saved[0] if saved else None, timed_out=group is None)
                events.extend(self.step(key, iter([] if group is None else [parts(group)]), state))
                changed[text] = state.saved(now_ms)
            return [e for e in events if len(e)], changed, len(changed)
        lanes = self._fast_lane(rows, codes, [text for text, _, group in work if group is not None]) \
            if rows is not None else {}
        group_keys: list[dict] = []
        found: dict[str, list[pd.DataFrame | Windows]] = {}
        at: dict[str, list[np.ndarray]] = {}
        for text, key, group in work:
            saved = self.groups.get(text)
            lane = lanes.get(text)
            done = None if lane is None else self.step.ready(*lane, saved[0] if saved else None, now_ms)
            if done is None:
                done = self.step.advance(key, None if group is None else parts(group), saved[0] if saved else None,
                                         now_ms)
            changed[text] = [done.state, now_ms + done.timeout_ms if done.timeout_ms is not None else None]
            if done.decided is not None:
                self._known_now[text] = (done.decided, done.counted)
            if done.parts:
                for kind, windows in done.parts:
                    found.setdefault(kind, []).append(windows)
                    at.setdefault(kind, []).append(np.full(len(windows), len(group_keys), np.int64))
                group_keys.append(self.plan.group_keys(key if keys else ()))
        if not group_keys:
            return [], changed, len(changed)
        joined = {kind: (concat_windows(frames), np.concatenate(at[kind])) for kind, frames in found.items()}
        events = batch_event_rows(self.plan, group_keys, joined)
        return ([events] if len(events) else []), changed, len(changed)


    def _fast_lane(self, rows: pd.DataFrame, codes: np.ndarray,
                   texts: list[str]) -> dict[str, tuple[Chunk, int, int]]:
        """Each group's rows as the window core reads them, prepared for the whole batch at once,
        with the earliest and latest time of its raw rows, when the batch holds only new rows and
        the stream waits for no watermark (key text -> those; empty when the batch takes the general
        road). ``codes`` number each row's group, ``texts`` the groups in that order. Most live
        batches are these: one row or a few per group, where preparing group by group costs more
        than the scan."""
        plan = self.plan
        if plan.spec.watermark or plan.expired_time is not None or not len(rows):
            return {}
        if not bool(np.all(rows["_change_type"].to_numpy(object) == "insert")):
            return {}
        ts = rows[plan.ts_column].to_numpy(np.int64)
        order = np.lexsort((ts, codes))
        codes, ts = codes[order], ts[order]
        if bool(np.any((codes[1:] == codes[:-1]) & (ts[1:] <= ts[:-1]))):  # two rows of a group at one time
            return {}
        groups = np.arange(len(texts) + 1)
        raw_bounds = np.searchsorted(codes, groups)
        ordered = rows.iloc[order].reset_index(drop=True)
        ordered["__group"] = codes
        prepared = plan.prepare(ordered, ordered=True, keep=("__group",))
        bounds = np.searchsorted(prepared["__group"].to_numpy(np.int64), groups).tolist()
        columns = {name: prepared[name].to_numpy() for name in prepared.columns if name != "__group"}
        return {text: (Chunk({name: values[bounds[i]:bounds[i + 1]] for name, values in columns.items()},
                             bounds[i + 1] - bounds[i]),
                       int(ts[raw_bounds[i]]), int(ts[raw_bounds[i + 1] - 1]))
                for i, text in enumerate(texts)}


#: a batch's rows as a frame, kept for the other streams of the process reading the same rows: the
#: feed's table of a version (by identity), the columns, the PARTITION BY keys -> (table, frame, groups)
_frames: collections.OrderedDict[tuple, tuple[pa.Table, pd.DataFrame, tuple]] = collections.OrderedDict()
_frames_lock = threading.Lock()
#: frames kept, and the most rows of one kept (a batch catching up is converted for its stream alone)
FRAMES_KEPT, FRAME_ROWS = 64, 20_000


def _frame(table: pa.Table, plan: TriggerPlan) -> tuple[pd.DataFrame, tuple[np.ndarray, list[tuple]]]:
    """A batch's raw rows as :meth:`Detector._rows` gives them, and their groups (:func:`group_codes`).

    Every stream on a table reads each new version's rows: the streams that read the same columns
    and group them the same way share one conversion, and each gets its own copy of the frame."""
    key = (id(table), plan.columns, plan.keys, plan.ts_column)
    with _frames_lock:
        found = _frames.get(key)
        if found is not None and found[0] is table:  # (an id is reused only once its table is gone)
            _frames.move_to_end(key)
            return found[1].copy(), found[2]
    selected = table.select([*plan.columns, "_change_type", "_commit_version"])
    frame = selected.to_pandas()
    if plan.ts_column not in plan.keys:  # the step works in microseconds
        frame[plan.ts_column] = micros(frame[plan.ts_column])
    groups = group_codes(selected, plan.keys)
    if table.num_rows > FRAME_ROWS:
        return frame, groups
    with _frames_lock:
        _frames[key] = (table, frame, groups)
        while len(_frames) > FRAMES_KEPT:
            _frames.popitem(last=False)
    return frame.copy(), groups


#: the turns whose slot the calling thread's batch holds (none: it holds no turn)
_holding = threading.local()


class Turns:
    """At most ``slots`` batches at once among the detectors of a process, those expected to report
    the most windows first, and none waiting more than ``max_wait_s`` for its turn.

    A new version of a table wakes every stream on it at once. Run side by side, their batches share
    the interpreter's lock, and each of them ends only when nearly all have: every stream's output
    waits for the whole round. Taken in turns, the first ends after one batch, the next after two:
    half the round on average, for the same work. A freed slot goes to the work that finishes a
    batch already detected (its computation asked by a task), then to the detector expected to
    report the most windows (``weight``, :meth:`Detector.expected_events`), those expected to report
    as many in the order they asked: batches costing about the same, the results wait least in all
    when the batches with the most of them go first. One whose batch is not expected to report a
    window (:meth:`Detector.expects_windows`) waits until no other does: its place in the round
    delays no result. A batch that waits for something else (its computation for Spark, its
    notifications for a receiver: :func:`elsewhere`) hands its slot on meanwhile, and takes the
    next one back before any other; one that has written its results (LOW_LATENCY_CALC) steps back
    (:meth:`step_back`), what is left of it reporting no window. One that holds its turn long all the
    same delays the others by ``max_wait_s`` at most: then they run beside it, over the slots, as they
    would without turns."""

    def __init__(self, slots: int, max_wait_s: float = 1.0) -> None:
        if slots < 1:
            raise ValueError(f"a process needs at least one batch slot, not {slots}")
        self.max_wait_s = max_wait_s
        self._free = slots  # below zero while batches that waited too long run over the slots
        self._lock = threading.Lock()
        # (-weight, order asked, its event): a heap, the heaviest first, then the first to ask
        self._waiting: list[tuple[float, int, threading.Event]] = []
        self._asked = itertools.count()
        self._later: collections.deque[threading.Event] = collections.deque()  # expected to report nothing

    @contextlib.contextmanager
    def turn(self, *, expected: bool = True, weight: float = 0.0, first: bool = False) -> Iterator[None]:
        """The block runs in a turn; ``expected``: the batch is expected to report windows, about
        ``weight`` of them; ``first``: it finishes work already detected (computing a batch's
        windows), which goes before the batches waiting, as a batch back from :meth:`away` does."""
        self._take(first=first, later=not expected, weight=weight)
        _holding.turns = self
        try:
            yield
        finally:
            _holding.turns = None
            self._give()

    @contextlib.contextmanager
    def away(self) -> Iterator[None]:
        """The block runs without the turn the calling thread holds, which it takes back after it,
        first in line."""
        _holding.turns = None
        self._give()
        try:
            yield
        finally:
            self._take(first=True)
            _holding.turns = self

    def step_back(self) -> None:
        """The calling thread's batch, holding a turn, has written its results: the rest of it waits
        for a turn behind the batches expected to report windows, as a batch expected to report
        none does."""
        self._give()
        self._take(first=False, later=True)

    def _take(self, *, first: bool, later: bool = False, weight: float = 0.0) -> None:
        with self._lock:
            mine = None
            if self._free > 0 and not self._waiting and not self._later:
                self._free -= 1
            else:
                mine = threading.Event()
                if first:
                    heapq.heappush(self._waiting, (-float("inf"), -next(self._asked), mine))
                elif later:
                    self._later.append(mine)
                else:
                    heapq.heappush(self._waiting, (-weight, next(self._asked), mine))
        if mine is not None and not mine.wait(self.max_wait_s):  # (set: the slot was handed over)
            with self._lock:
                if not mine.is_set():  # waited long enough: run over the slots
                    if mine in self._later:
                        self._later.remove(mine)
                    else:
                        self._waiting = [entry for entry in self._waiting if entry[2] is not mine]
                        heapq.heapify(self._waiting)
                    self._free -= 1

    def _give(self) -> None:
        with self._lock:
            if self._free >= 0 and (self._waiting or self._later):
                (heapq.heappop(self._waiting)[2] if self._waiting else self._later.popleft()).set()
            else:
                self._free += 1


@contextlib.contextmanager
def elsewhere() -> Iterator[None]:
    """The calling thread's batch waits for something other than this process (Spark, a receiver)
    during the block: the turn it holds, if any, goes to the next batch meanwhile."""
    turns = getattr(_holding, "turns", None)
    if turns is None:
        yield
        return
    with turns.away():
        yield


def step_back() -> None:
    """The calling thread's batch has written its results: what is left of it waits behind the batches
    of the process expected to report windows (:meth:`Turns.step_back`); nothing without turns."""
    turns = getattr(_holding, "turns", None)
    if turns is not None:
        turns.step_back()


class LiveDetector:
    """A :class:`Detector` run by a thread of its own until stopped: a batch as soon as its feed has
    a new version (or a timeout is due), everything waiting in one batch when it is behind; with
    ``turns``, each batch in its turn among the process's detectors.

    It answers what the node asks of a running query: ``id``, ``isActive``, ``exception()``,
    ``lastProgress``, ``stop()``, ``awaitTermination()``. ``on_batch`` is told of each batch once it
    is committed.
    """

    def __init__(self, detector: Detector, *, name: str, idle_s: float = 1.0, turns: Turns | None = None,
                 on_batch: Callable[[BatchReport], None] | None = None) -> None:
        self.detector = detector
        self.name = name
        self.idle_s = idle_s
        self.turns = turns
        self.on_batch = on_batch
        self._stop = threading.Event()
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name=f"detector:{name}", daemon=True)
        self.run_id = str(uuid.uuid4())

    @property
    def id(self) -> str:
        return self.detector.id

    def start(self) -> LiveDetector:
        self.detector.feed.follow()
        self._thread.start()
        return self

    def _run(self) -> None:
        detector = self.detector
        try:
            while not self._stop.is_set():
                with self.turns.turn(expected=detector.expects_windows(), weight=detector.expected_events()) \
                        if self.turns is not None else contextlib.nullcontext():
                    ran = detector.run_once()
                if ran is not None:
                    if self.on_batch is not None:
                        self.on_batch(ran)
                    continue
                wait = self.idle_s
                due = detector.next_timeout()
                if due is not None:
                    wait = max(0.0, min(wait, due - time.time()))
                detector.feed.wait(detector.waits_after(), wait)
        except BaseException as err:  # reported to the host, which starts the stream again later
            self._error = err
        finally:
            detector.feed.unfollow()

    @property
    def isActive(self) -> bool:
        return self._thread.is_alive()

    def exception(self) -> BaseException | None:
        return self._error

    @property
    def lastProgress(self) -> dict | None:
        last = self.detector.last
        return last.progress() if last is not None else None

    def stop(self, timeout: float = 60.0) -> None:
        self._stop.set()
        self.detector.feed.wake()  # if it waits for a version
        self._thread.join(timeout)

    def awaitTermination(self, timeout: float | None = None) -> bool:
        self._thread.join(timeout)
        return not self._thread.is_alive()


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
        _commit_arrow(stored, path, app_id, batch_id)
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


def _commit_arrow(events: pa.Table, path: str, app_id: str, batch_id: int) -> None:
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


class _Step:
    """One group's batch (3.3.7 streams): its rows through the window core, from its saved state.

    The state (JSON text) holds the core's ``carry``; ``pending``, the rows after the decided time
    that wait for the watermark (raw trigger-table values, ``ts`` in microseconds); ``decided``, the
    watermark of the last scan; ``max_ts`` and ``first_ts``, the latest and earliest event times
    scanned; ``due``, the next MAX_DELAY trigger of each open window (processing time); and the
    counters ``dropped`` and ``recalculations``.

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
            data = np.isin(raw["_change_type"].to_numpy(object), DATA_CHANGES)
            if data.any():
                top = int(times[data].max())
                max_ts = top if max_ts is None else max(max_ts, top)
            late = times <= decided if decided is not None else np.zeros(len(times), bool)
            drop = np.zeros(len(times), bool)
            if plan.expired_time is not None and max_ts is not None:
                drop |= times < max_ts - plan.expired_time
            if not plan.recalculates:
                drop |= late
            if (drop & data).any():
                saved["dropped"] = saved.get("dropped", 0) + int((drop & data).sum())
            if late.any() or drop.any():
                changes, live = raw[late & ~drop], raw[~late & ~drop]
            else:  # the usual batch: every row new and in time
                changes, live = None, raw
            if changes is not None and len(changes):
                assert decided is not None  # rows count as late only once a watermark was decided
                done = recalculate(plan, tuple(key), changes, version=int(raw["_commit_version"].max()),
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
        saved.update(carry=carry, decided=decided, max_ts=max_ts, first_ts=first_ts,
                     pending=_records(pending, plan.columns))
        return Advanced(json.dumps(saved, default=_json_default), timeout, [(k, w) for k, w in parts if len(w)])

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
        saved.update(carry=carry, decided=max_ts, max_ts=max_ts, first_ts=first_ts, pending=None)
        return Advanced(json.dumps(saved, default=_json_default), timeout, [(k, w) for k, w in parts if len(w)],
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


class _LegacyStep:
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
        state.update((json.dumps(group.state(), default=_json_default),))
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


def _json_default(value: object) -> object:
    if hasattr(value, "item"):
        return value.item()
    return str(value)
