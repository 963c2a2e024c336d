"""The live detector: a stream's windows, found batch by batch in its trigger table's Delta change
feed, in the process that hosts it (the stream node, or a task catching up).

Each batch reads the versions committed since the last one (:class:`.changes.ChangeFeed`, shared by
the streams on one table), keeps the change kinds the stream reads, groups the rows by the PARTITION
BY keys and runs the window core group by group (:class:`.step.Step`). The per-group state is the core's
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
- IDLE_TIMEOUT: a group that received no rows for the timeout (processing time, from the batch that
  last brought it rows) fires ``IDLE`` by the same timeouts, and its next rows ``RESUME``, both with
  the idle span in ``window_start``/``window_end`` and one trigger id (:meth:`.step.Step._idle`).
  The span is in the group's state, so it survives a restart (TDengine forgets it).
- FILL_HISTORY[_FIRST]: the first batch reads the table as it is (its snapshot), the next ones the
  changes after it, so history is complete before any live row is processed.
"""

from __future__ import annotations

import collections
import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from airflow_stream_provider.model import TriggerMode
from airflow_stream_provider.model.events import EventType, TriggerKind
from airflow_stream_provider.windows.changes import ChangeFeed
from airflow_stream_provider.windows.checkpoint import RETAIN, SNAPSHOT_EVERY, Checkpoint, app_id_of, key_text
from airflow_stream_provider.windows.columns import Windows, concat_windows
from airflow_stream_provider.windows.core import Chunk
from airflow_stream_provider.windows.events import batch_event_rows, commit_events, event_table
from airflow_stream_provider.windows.late import DATA_CHANGES, stamp
from airflow_stream_provider.windows.nested_step import NestedStep
from airflow_stream_provider.windows.step import GroupState, LegacyStep, Step
from airflow_stream_provider.windows.trigger_plan import TriggerPlan, micros
from airflow_stream_provider.windows.turns import step_back

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
    """Whether the detector has something to do when no rows come: MAX_DELAY, IDLE_TIMEOUT, or
    incremental windows' MAX_DELAY, CONTINUOUS_WINDOW_CLOSE recalculation and FORCE_WINDOW_CLOSE windows."""
    incremental = plan.incremental
    return plan.max_delay is not None or plan.idle_timeout is not None or (incremental is not None and (
        incremental.max_delay is not None or incremental.recalculate is not None
        or incremental.mode == TriggerMode.FORCE_WINDOW_CLOSE))


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
    for a caller that reads the table. ``rows``: the trigger table's rows the batch read (the input
    rate of SHOW STREAMS)."""

    id: int
    events: pa.Table | None
    version: int | None
    store_events: Callable[[], None] | None = None
    rows: int = 0


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
        window, so it waits behind the batches of the process that do (:meth:`.turns.Turns.step_back`).
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
        self.step = (LegacyStep if plan.incremental is not None else NestedStep if plan.nested else Step)(
            plan, timeouts=self.timeouts)
        self.after_batch = after_batch
        self.results_first = results_first and after_batch is not None
        self.app_id = app_id_of(plan.stream, options.checkpoint)
        #: the last table version its batches read (None: the table's latest; a catch-up's end)
        self.until: int | None = None
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
        self.rows_read = 0  # the rows the batches of :meth:`run_available` read, in all
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
        if self.until is not None and latest is not None:
            latest = min(latest, self.until)
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
        order of turns (:class:`.turns.Turns`) depends on it."""
        return self._quiet + 1 >= self._period

    def expected_events(self) -> int:
        """How many events the next batch is expected to report, when it is expected to report any
        (:meth:`expects_windows`): as many as the last batch that reported some. Only the order of
        turns (:class:`.turns.Turns`) depends on it."""
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
        counting = spec.kind is TriggerKind.COUNT_WINDOW and not plan.pre_filter and not plan.count_columns
        if (not isinstance(self.step, Step) or not (spec.kind is TriggerKind.INTERVAL or counting) or spec.watermark
                or plan.expired_time is not None or plan.max_delay is not None or plan.idle_timeout is not None
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
        if spec.kind is TriggerKind.INTERVAL:
            # the first window end after what each group decided: a window closes when its end is reached
            return bool(np.all(high < spec.window_ends(spec.first_windows(decided))))
        # window j holds rows j * sliding ... j * sliding + count - 1 of its group: it closes at the last
        last = spec.count - 1
        closes_at = last + np.maximum(0, -(-(total - last) // spec.count_sliding)) * spec.count_sliding
        return bool(np.all(total + np.bincount(codes, minlength=len(key_values)) - 1 < closes_at))

    def _text_of(self, key: tuple) -> str:
        """The text a group's state is kept under, made once per key (every batch names its groups)."""
        text = self._texts.get(key)
        if text is None:
            text = self._texts[key] = key_text(key)
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
        read = 0 if rows is None else rows.attrs.get("read", len(rows))  # (ROLLUP BY: not its copies)
        events, changed, groups = self._scan(rows, int(offset["at_ms"]))
        written = event_table(events, batch, offset["at_ms"])
        count = 0 if written is None else written.num_rows
        stored = written is None

        def store_events() -> None:
            nonlocal stored
            if not stored:
                assert written is not None
                commit_events(written, self.options.events_path, self.app_id, batch)
                stored = True

        if self.results_first:
            assert self.after_batch is not None
            self.after_batch(DetectedBatch(batch, written, offset["last"], None if stored else store_events,
                                           rows=read))
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
            self.after_batch(DetectedBatch(batch, written, offset["last"], rows=read))
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
        self.last = BatchReport(batch, offset.get("first"), offset["last"], read,
                                groups, count, time.monotonic() - began, time.time())
        return self.last

    def run_available(self) -> int:
        """Run batches until the table as it is now is read (and no timeout is due); how many ran
        (:attr:`rows_read` adds up the rows they read)."""
        ran = 0
        while (report := self.run_once()) is not None:
            ran += 1
            self.rows_read += report.rows
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
            table = table.filter(pc.greater_equal(ts, stamp(plan.since, ts.type)))
        read = table.num_rows
        table = plan.expand(table)  # (ROLLUP BY: once per rollup group)
        if not table.num_rows:
            return None
        frame, groups = _frame(table, plan)
        frame.attrs["groups"] = groups
        frame.attrs["read"] = read
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
        if isinstance(self.step, LegacyStep):
            events: list[pd.DataFrame] = []
            for text, key, group in work:
                saved = self.groups.get(text)
                state = GroupState(saved[0] if saved else None, timed_out=group is None)
                events.extend(self.step(key, iter([] if group is None else [parts(group)]), state))
                changed[text] = state.saved(now_ms)
            return [e for e in events if len(e)], changed, len(changed)
        lanes = self._fast_lane(rows, codes, [text for text, _, group in work if group is not None]) \
            if rows is not None and not self.plan.nested else {}
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
        if plan.rollup and "tbname" in rows:
            # a rollup group gathers many subtables' rows, often at one time: ordered as the general
            # road orders them (time, then subtable), and only a subtable's two rows at one time wait
            tables = pd.factorize(rows["tbname"], sort=True)[0]
            order = np.lexsort((tables, ts, codes))
            codes, ts, tables = codes[order], ts[order], tables[order]
            tie = (tables[1:] == tables[:-1]) & (ts[1:] == ts[:-1])
        else:
            order = np.lexsort((ts, codes))
            codes, ts = codes[order], ts[order]
            tie = ts[1:] <= ts[:-1]
        if bool(np.any((codes[1:] == codes[:-1]) & tie)):  # two rows of a group at one time
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
    incremental = plan.incremental is not None and "_commit_timestamp" in table.column_names
    written = ["_commit_timestamp"] if incremental else []  # (incremental windows count time from the write)
    key = (id(table), plan.columns, plan.keys, plan.ts_column, bool(written))
    with _frames_lock:
        found = _frames.get(key)
        if found is not None and found[0] is table:  # (an id is reused only once its table is gone)
            _frames.move_to_end(key)
            return found[1].copy(), found[2]
    selected = table.select([*plan.columns, "_change_type", "_commit_version", *written])
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
