"""Windows of a stream of TDengine's engine before 3.3.7: the rows it counts, late data, emission.

That engine (references 001, 002 and 003) keeps each group's windows incrementally from the rows
it *accepts*, which are not always the table's rows:

- a row is *expired* when it is not newer than its own table's latest row and falls into a closed
  window (INTERVAL: the latest window holding it has ended at the watermark; the other windows:
  its time is before the watermark). IGNORE EXPIRED 1 drops it; 0 recalculates its windows from
  the table;
- a row written again at an existing timestamp is, with IGNORE UPDATE 1, one more row (the old
  version stays counted); with IGNORE UPDATE 0 its windows are recalculated from the table;
- a delete recalculates its windows from the table, and a window recalculated from the table
  counts the table's rows again;
- with DELETE_MARK, a row older than the group's latest time minus the mark is dropped.

One write (one commit of the trigger table) is judged as a whole against what the group held
before it, so a micro-batch gives the same windows however many commits it holds.

:class:`LegacyGroup` keeps one group: the window core's carry at the decided time, the accepted
rows that wait for the watermark, each source table's latest time, and the *view*: for each row
key where what the stream counts differs from the table's row, the rows it counts there (none: the
table's row was dropped; several: rewrites counted as rows). Each event carries that part of the
view for its window (``adjust``) and the table version its window was decided at
(``table_version``), so the computation reads exactly the rows the window counts.

Emission, by TRIGGER:

- WINDOW_CLOSE: a window is written when it closes; a recalculation writes the windows it changed
  again and retracts (``WINDOW_INVALIDATION``) the ones that are gone.
- AT_ONCE: also every open window whose rows changed (``WINDOW_UPDATE``), as it stands; an open
  window that disappears (sessions merging, state windows rebuilt) is retracted. An event window
  is written only once its end condition has held.
- MAX_DELAY: also an open window whose rows changed, once MAX_DELAY has passed since it was last
  written (or first seen), and again only after new rows.
- CONTINUOUS_WINDOW_CLOSE (INTERVAL only): as WINDOW_CLOSE, but the closed windows that late
  changes touch are recalculated every RECALCULATE period instead of at once.
"""

from __future__ import annotations

import copy
import json
import warnings
from collections.abc import Callable, Iterator

import numpy as np
import pandas as pd

from airflow_stream_provider.model import EventType, TriggerKind, TriggerMode
from airflow_stream_provider.values import json_default
from airflow_stream_provider.windows.columns import empty_windows, window_frame
from airflow_stream_provider.windows.core import json_safe, scan
from airflow_stream_provider.windows.events import event_rows
from airflow_stream_provider.windows.late import rescan, safe_point
from airflow_stream_provider.windows.trigger_plan import IncrementalPolicy, TriggerPlan, micros

#: reads a group's raw rows ``lo <= ts <= hi`` (microseconds) at a table version
Reader = Callable[[int, int, int], pd.DataFrame]
DATA = ("insert", "update_postimage")


class LegacyGroup:
    """One group of a legacy stream: feed it change-feed rows (:meth:`apply`), then :meth:`emit`;
    its events are in :attr:`events`, its state in :meth:`state`.

    :param saved: the state :meth:`state` returned last time (``{}`` for a new group).
    :param read: the group's rows in the trigger table at a version (timestamps in microseconds).
    :param now: processing time, in microseconds (MAX_DELAY, CONTINUOUS_WINDOW_CLOSE).
    """

    def __init__(self, plan: TriggerPlan, key_values: tuple, saved: dict, read: Reader, now: int) -> None:
        assert plan.incremental is not None, "a legacy group needs a plan of incremental windows"
        self.plan, self.spec = plan, plan.spec
        self.policy: IncrementalPolicy = plan.incremental
        self.key_values = key_values
        self.keys = plan.group_keys(key_values)
        self.read = read
        self.now = now
        #: processing time of the latest write the group read (its commit), when the feed says it
        self.written: int | None = None
        self.saved = saved
        self.carry: dict | None = saved.get("carry")
        self.decided: int | None = saved.get("decided")
        self.max_ts: int | None = saved.get("max_ts")
        self.first_ts: int | None = saved.get("first_ts")
        self.version: int | None = saved.get("version")
        self.latest: dict[str, int] = dict(saved.get("latest") or {})
        self.pending = _rows(saved.get("pending"), plan.columns, plan.ts_column)
        self.view: dict[str, dict] = dict(saved.get("view") or {})
        self.emitted: dict[str, dict] = dict(saved.get("emitted") or {})
        self.dirty: set[int] = set(saved.get("dirty") or ())
        self.next_recalc: int | None = saved.get("next_recalc")
        self.next_close: int | None = saved.get("next_close")  # FORCE_WINDOW_CLOSE: the next window end
        self.events: list[pd.DataFrame] = []
        self._touched: list[np.ndarray] = []
        self._closed: set[str] = set()

    # --- rows -----------------------------------------------------------------------------------

    def key(self, row: dict) -> str:
        return json.dumps([json_safe(row[c]) for c in self.plan.row_key])

    def keys_of(self, rows: pd.DataFrame) -> list[str]:
        columns = [rows[c].tolist() for c in self.plan.row_key]
        return [json.dumps([json_safe(v) for v in values]) for values in zip(*columns)]

    def table_of(self, row: dict) -> str:
        column = self.policy.table_column
        return "" if column is None else str(row[column])

    def adjusted(self, raw: pd.DataFrame, view: dict[str, dict], lo: int, hi: int) -> pd.DataFrame:
        """Table rows ``lo <= ts <= hi`` as the stream counts them: each key of ``view`` there counts
        its view rows instead of the table's row."""
        entries = {k: e for k, e in view.items() if lo <= e["ts"] <= hi}
        if not entries:
            return raw
        keep = np.array([k not in entries for k in self.keys_of(raw)], dtype=bool) if len(raw) else \
            np.zeros(0, bool)
        extra = _rows([row for e in entries.values() for row in e["rows"]], self.plan.columns, self.plan.ts_column)
        return _concat([raw[keep], extra])

    def _read(self, version: int, lo: int, hi: int, view: dict[str, dict]) -> pd.DataFrame:
        raw = self.read(version, lo, hi) if version >= 0 else _rows(None, self.plan.columns, self.plan.ts_column)
        return self.adjusted(raw, view, lo, hi)

    def _count(self, name: str, n: int = 1) -> None:
        self.saved[name] = int(self.saved.get(name, 0)) + n

    # --- input ----------------------------------------------------------------------------------

    def apply(self, raw: pd.DataFrame) -> None:
        """Take a micro-batch of change-feed rows of this group (``_change_type``,
        ``_commit_version``, timestamps in microseconds), one commit after another."""
        if raw.empty:
            return
        raw = raw.sort_values("_commit_version", kind="stable").reset_index(drop=True)
        versions = raw["_commit_version"].to_numpy(np.int64)
        if "_commit_timestamp" in raw and raw["_commit_timestamp"].notna().all():
            self.written = min(self.now, int(raw["_commit_timestamp"].min()))
        if self.policy.mode == TriggerMode.FORCE_WINDOW_CLOSE:  # windows are read at their wall-clock end
            if self.next_close is None:
                self._first_close(raw)
            self._at(int(versions.max()))
            return
        if self._in_order(raw, versions):
            self._accept(raw)
            self._at(int(versions.max()))
        else:
            for version in np.unique(versions).tolist():
                self._at(int(version))
                self._commit(raw[versions == version], int(version))
        self._scan_ready()

    def _at(self, version: int) -> None:
        """The table version the group's rows are now known up to (events are decided there)."""
        self.version = version if self.version is None else max(self.version, version)

    def _in_order(self, raw: pd.DataFrame, versions: np.ndarray) -> bool:
        """Only new rows, every commit later than everything before it: nothing to judge row by row."""
        if not (raw["_change_type"] == "insert").all():
            return False
        ts = raw[self.plan.ts_column].to_numpy(np.int64)
        before = self.max_ts if self.max_ts is not None else np.iinfo(np.int64).min
        starts = np.flatnonzero(np.diff(versions, prepend=versions[0] - 1))
        lows, highs = np.minimum.reduceat(ts, starts), np.maximum.reduceat(ts, starts)
        previous = np.concatenate([[before], np.maximum.accumulate(highs)[:-1]])
        return bool(np.all(lows > previous))

    def _accept(self, rows: pd.DataFrame) -> None:
        """New rows in time order: all wait for the watermark."""
        self.pending = _concat([self.pending, rows[list(self.plan.columns)]])
        ts = rows[self.plan.ts_column].to_numpy(np.int64)
        self._touched.append(ts)
        column = self.policy.table_column
        if column is None:
            self._note("", int(ts.max()))
        else:
            for table, top in rows.groupby(column)[self.plan.ts_column].max().items():
                self._note(str(table), int(top))

    def _note(self, table: str, ts: int) -> None:
        self.latest[table] = max(self.latest.get(table, ts), ts)
        self.max_ts = ts if self.max_ts is None else max(self.max_ts, ts)

    def _expired(self, ts: int, latest: int | None, watermark: int | None) -> bool:
        if watermark is None or latest is None or ts > latest:
            return False
        spec = self.spec
        if spec.kind is TriggerKind.INTERVAL:  # the latest window holding the row has ended
            k = (ts - spec.offset) // spec.sliding
            return k * spec.sliding + spec.offset + spec.interval <= watermark
        return ts < watermark

    def _commit(self, rows: pd.DataFrame, version: int) -> None:
        """One write, judged against what the group held before it."""
        policy, ts_column = self.policy, self.plan.ts_column
        latest_before = dict(self.latest)
        watermark = None if self.max_ts is None else self.max_ts - self.spec.watermark
        old_view = dict(self.view)
        open_before = self.provisional()
        kinds = rows["_change_type"]
        pre = {self.key(r): _clean(r) for r in rows[kinds == "update_preimage"].to_dict("records")}
        post = set(self.keys_of(rows[kinds == "update_postimage"]))
        # a row rewritten into another group leaves this one: here it is a delete
        moved = [r for k, r in pre.items() if k not in post]
        resets: list[int] = []  # the windows holding these times count the table's rows again
        late: list[int] = []  # rows counted at or before the decided time
        accepted: list[dict] = []
        touched: list[int] = []
        for row in [*rows[kinds == "delete"].to_dict("records"), *moved]:
            ts = int(row[ts_column])
            self.view.pop(self.key(row), None)
            resets.append(ts)
            touched.append(ts)
        for row in rows[kinds.isin(DATA)].to_dict("records"):
            key, ts, table = self.key(row), int(row[ts_column]), self.table_of(row)
            update = row["_change_type"] == "update_postimage" and key in pre  # the row was in this group
            row = _clean(row)
            past_mark = policy.delete_mark is not None and self.max_ts is not None and \
                ts < self.max_ts - policy.delete_mark
            expired = past_mark or self._expired(ts, latest_before.get(table), watermark)
            if expired and (policy.ignore_expired or past_mark):
                self._count("dropped")
                if key not in self.view:  # the stream keeps what it counted there before
                    self.view[key] = {"ts": ts, "rows": [pre[key]] if update and key in pre else []}
                continue
            if expired or (update and not policy.ignore_update):
                self.view.pop(key, None)
                resets.append(ts)
            else:
                if update:  # IGNORE UPDATE 1: one more row; what was counted there stays
                    before = self.view[key]["rows"] if key in self.view else ([pre[key]] if key in pre else [])
                    self.view[key] = {"ts": ts, "rows": [*before, row]}
                else:
                    self.view.pop(key, None)
                if self.decided is not None and ts <= self.decided:
                    late.append(ts)
                else:
                    accepted.append(row)
            touched.append(ts)
            self._note(table, ts)
        if accepted:
            self.pending = _concat([self.pending, _rows(accepted, self.plan.columns, self.plan.ts_column)])
        self._touched.append(np.array(touched, np.int64))
        if resets:  # the open windows holding a reset count the table's rows again
            self._recount(version, _spans(open_before, resets, inclusive=self.spec.kind is not TriggerKind.INTERVAL))
        scanned = [t for t in resets if self.decided is not None and t <= self.decided]
        if scanned or late:
            self._rescan(version, scanned, late, old_view)

    def _recount(self, version: int, spans: list[tuple[int, int]]) -> None:
        """Take the rows of ``spans`` from the table again: the view there goes, and the waiting rows
        there are the table's."""
        for lo, hi in spans:
            self.view = {k: e for k, e in self.view.items() if not lo <= e["ts"] <= hi}
            low = lo if self.decided is None else max(lo, self.decided + 1)
            if low > hi:
                continue
            ts = self.pending[self.plan.ts_column].to_numpy(np.int64)
            keep = self.pending[(ts < low) | (ts > hi)]
            self.pending = _concat([keep, self.read(version, low, hi)[list(self.plan.columns)]])

    # --- windows --------------------------------------------------------------------------------

    def _rescan(self, version: int, resets: list[int], late: list[int], old_view: dict[str, dict]) -> None:
        """Scan again, from a safe point, the decided windows this write changed."""
        assert self.decided is not None  # changes count as scanned only once a watermark was decided
        plan, spec, decided = self.plan, self.spec, self.decided
        earliest = min(resets + late)

        def read_now(at: int, lo: int, hi: int) -> pd.DataFrame:
            return self._read(at, lo, hi, self.view)

        start, carry = safe_point(plan, self.key_values, version, earliest, self.first_ts, read=read_now)
        then_raw = self._read(version - 1, start, decided, old_view)
        if resets:  # the windows holding a reset count the table's rows again: their view goes
            old, _ = scan(spec, plan.prepare(then_raw), copy.deepcopy(carry), watermark=decided)
            for lo, hi in _spans(old, resets, inclusive=spec.kind is not TriggerKind.INTERVAL):
                self.view = {k: e for k, e in self.view.items() if not lo <= e["ts"] <= hi}
        now_raw = self._read(version, start, decided, self.view)
        done = rescan(plan, then_raw, now_raw, start=start, carry=carry, decided=decided, first_ts=self.first_ts,
                      earliest=earliest, touched=np.array(resets + late, np.int64))
        self.carry = done.carry
        self.first_ts = earliest if self.first_ts is None else min(self.first_ts, earliest)
        self._count("recalculations")
        if self.policy.mode == TriggerMode.CONTINUOUS_WINDOW_CLOSE:  # recalculated on the period, not now
            for frame in (done.invalidate, done.windows[done.windows["closed"]]):
                self.dirty.update(((frame["wstart"] - spec.offset) // spec.sliding).astype(int).tolist())
            self._add(done.windows[~done.windows["closed"]])
            return
        self._closed.update(_wids(done.windows[done.windows["closed"]]))
        self._add(done.windows, invalidate=done.invalidate)

    def _scan_ready(self) -> None:
        """Scan the accepted rows the watermark has passed."""
        if self.max_ts is None:
            return
        watermark = self.max_ts - self.spec.watermark
        ts = self.pending[self.plan.ts_column].to_numpy(np.int64)
        ready = self.pending[ts <= watermark]
        if not len(ready) and self.decided is not None and watermark <= self.decided:
            return
        self.pending = self.pending[ts > watermark].reset_index(drop=True)
        windows, self.carry = scan(self.spec, self.plan.prepare(ready), self.carry, watermark=watermark)
        if len(ready):
            low = int(ready[self.plan.ts_column].min())
            self.first_ts = low if self.first_ts is None else min(self.first_ts, low)
        self.decided = watermark if self.decided is None else max(self.decided, watermark)
        self._closed.update(_wids(windows[windows["closed"]]))
        self._add(windows)

    def provisional(self) -> pd.DataFrame:
        """The windows still open, as they stand with every accepted row (an event window only once
        its end condition has held)."""
        rows = self.plan.prepare(self.pending)
        windows, _ = scan(self.spec, rows, copy.deepcopy(self.carry), final=True)
        return windows

    # --- output ---------------------------------------------------------------------------------

    def emit(self) -> None:
        """The events of open windows: AT_ONCE and MAX_DELAY write them, CONTINUOUS_WINDOW_CLOSE
        recalculates what changed once its period has passed."""
        if self.policy.provisional:
            self._emit_open()
        if self.policy.recalculate is not None:
            self._recalculate_due()
        if self.policy.mode == TriggerMode.FORCE_WINDOW_CLOSE:
            self._force_close()

    def _first_close(self, raw: pd.DataFrame | None) -> None:
        """FORCE_WINDOW_CLOSE: the end of the group's first window, the one the clock was in when its
        first rows were written, or the one of its first row when that is later (rows written ahead
        of the clock: the windows before them are not the group's; streamFwcIntervalFill.sim)."""
        spec = self.spec
        first = self.now if self.written is None else self.written
        if raw is not None:
            data = raw[np.isin(raw["_change_type"].to_numpy(object), DATA)]
            if len(data):
                first = max(first, int(data[self.plan.ts_column].min()))
        self.next_close = ((first - spec.offset) // spec.interval + 1) * spec.interval + spec.offset

    def _force_close(self) -> None:
        """FORCE_WINDOW_CLOSE: each INTERVAL window is closed when the wall clock passes its end, once,
        with the rows the table holds then (:meth:`_first_close`: the first). Windows the clock passed
        while nothing ran (a pause) close on the next call."""
        spec = self.spec
        if self.next_close is None:
            self._first_close(None)
        assert self.next_close is not None
        ends = []
        while self.next_close <= self.now:
            ends.append(self.next_close)
            self.next_close += spec.interval
        if not ends or self.version is None:
            return
        starts = np.array(ends, np.int64) - spec.interval
        counts = np.array([len(self.plan.prepare(self._read(self.version, s, s + spec.interval - 1, self.view)))
                           for s in starts.tolist()], np.int64)
        keep = counts > 0 if not spec.keep_empty else np.ones(len(starts), bool)
        n = int(keep.sum())
        self._add(window_frame(starts[keep], starts[keep] + spec.interval, counts[keep], np.ones(n, bool),
                               np.zeros(n, bool)))

    def _emit_open(self) -> None:
        windows = self.provisional()
        touched = np.concatenate(self._touched) if self._touched else np.empty(0, np.int64)
        hit = _holds(windows, touched, inclusive=self.spec.kind is not TriggerKind.INTERVAL)
        at_once = self.policy.mode == TriggerMode.AT_ONCE
        delay = self.policy.max_delay or 0
        now_open: dict[str, dict] = {}
        write: list[int] = []
        for i, (wid, entry) in enumerate(zip(_wids(windows), _entries(windows))):
            before = self.emitted.get(wid)
            changed = before is None or _shape(before) != _shape(entry) or bool(hit[i]) or bool(before.get("dirty"))
            seen = before["seen"] if before is not None else self.now if self.written is None else self.written
            fired = before.get("fired") if before is not None else None
            # AT_ONCE writes every change; MAX_DELAY a change once the delay since the last write passed
            due = changed and (at_once or self.now >= (fired if fired is not None else seen) + delay)
            if due:
                write.append(i)
                fired = self.now
            now_open[wid] = {**entry, "seen": seen, "fired": fired, "dirty": changed and not due}
        gone = [e for wid, e in self.emitted.items()
                if wid not in now_open and wid not in self._closed and e.get("fired") is not None]
        self.emitted = now_open
        kind = "updated" if at_once else "delayed"
        self._add(empty_windows(), invalidate=_from_entries(gone), **{kind: windows.iloc[write]})

    def next_timeout(self) -> int | None:
        """Microseconds until this group has something to emit without new rows (None: never)."""
        dues = []
        if self.policy.mode == TriggerMode.MAX_DELAY:
            delay = self.policy.max_delay or 0
            dues += [(e["fired"] if e["fired"] is not None else e["seen"]) + delay
                     for e in self.emitted.values() if e.get("dirty")]
        if self.policy.recalculate is not None and self.dirty and self.next_recalc is not None:
            dues.append(self.next_recalc)
        if self.next_close is not None:
            dues.append(self.next_close)
        return max(1, min(dues) - self.now) if dues else None

    def _recalculate_due(self) -> None:
        policy, spec = self.policy, self.spec
        assert policy.recalculate is not None
        if self.next_recalc is None:
            self.next_recalc = self.now + policy.recalculate
        if self.now < self.next_recalc or not self.dirty:
            return
        self.next_recalc = self.now + policy.recalculate
        assert self.version is not None
        starts = np.array(sorted(self.dirty), np.int64) * spec.sliding + spec.offset
        counts = np.array([len(self.plan.prepare(self._read(self.version, s, s + spec.interval - 1, self.view)))
                           for s in starts.tolist()], np.int64)
        keep = counts > 0 if not spec.keep_empty else np.ones(len(starts), bool)
        closed = window_frame(starts[keep], starts[keep] + spec.interval, counts[keep], np.ones(int(keep.sum()), bool),
                              np.zeros(int(keep.sum()), bool))
        empty = int((~keep).sum())
        gone = window_frame(starts[~keep], starts[~keep] + spec.interval, counts[~keep], np.ones(empty, bool),
                            np.zeros(empty, bool))
        self.dirty.clear()
        self._count("recalculations")
        self._add(closed, invalidate=gone)

    def _add(self, windows: pd.DataFrame, *, invalidate: pd.DataFrame | None = None,
             updated: pd.DataFrame | None = None, delayed: pd.DataFrame | None = None) -> None:
        events = event_rows(self.plan, self.keys, windows, invalidate=invalidate, updated=updated, delayed=delayed)
        if events.empty:
            return
        events["table_version"] = pd.array([self.version] * len(events), dtype="Int64")
        events["adjust"] = [self._adjust(e) for e in events[["event_type", "window_start", "window_end"]]
                            .itertuples(index=False)]
        self.events.append(events)

    def _adjust(self, event: tuple) -> str | None:
        """The view within an event's window, as the computation applies it: drop the table's rows
        of these keys, add these rows."""
        kind, start, end = event
        if kind == EventType.WINDOW_INVALIDATION or not self.view:
            return None
        lo = int(start.value // 1000)
        hi = lo if pd.isna(end) else int(end.value // 1000) - (1 if self.spec.kind is TriggerKind.INTERVAL else 0)
        entries = [(k, e) for k, e in self.view.items() if lo <= e["ts"] <= hi]
        if not entries:
            return None
        return json.dumps({"keys": list(self.plan.row_key), "drop": [json.loads(k) for k, _ in entries],
                           "add": [row for _, e in entries for row in e["rows"]]}, default=json_default)

    def state(self) -> dict:
        """What :class:`LegacyGroup` needs next time (JSON-safe)."""
        if self.policy.delete_mark is not None and self.max_ts is not None:
            oldest = self.max_ts - self.policy.delete_mark
            self.view = {k: e for k, e in self.view.items() if e["ts"] >= oldest}
        return {**self.saved, "carry": self.carry, "decided": self.decided, "max_ts": self.max_ts,
                "first_ts": self.first_ts, "version": self.version, "latest": self.latest,
                "pending": _records(self.pending), "view": self.view, "emitted": self.emitted,
                "dirty": sorted(self.dirty), "next_recalc": self.next_recalc, "next_close": self.next_close}

    def all_events(self) -> pd.DataFrame | None:
        found = [e for e in self.events if len(e)]
        return pd.concat(found, ignore_index=True) if found else None


def as_micros(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` with every timestamp column as int64 microseconds since the epoch (as the rows a
    group keeps and compares)."""
    for name in frame.columns:
        dtype = frame[name].dtype
        if pd.api.types.is_datetime64_any_dtype(dtype):
            frame[name] = micros(frame[name])
    return frame


def _rows(records: list[dict] | dict | None, columns: tuple[str, ...], ts_column: str) -> pd.DataFrame:
    """Rows from records (a list of row dicts, or columns of lists), with ``columns``, the
    timestamp as int64 microseconds."""
    if not records:
        return pd.DataFrame({c: pd.Series([], dtype=np.int64 if c == ts_column else object) for c in columns})
    frame = pd.DataFrame(records).reindex(columns=list(columns))
    frame[ts_column] = frame[ts_column].astype(np.int64)
    return frame


def _concat(frames: list[pd.DataFrame]) -> pd.DataFrame:
    """Rows of several frames (the first kept when all are empty, for its columns)."""
    found = [f for f in frames if len(f)]
    if not found:
        return frames[0]
    if len(found) == 1:
        return found[0].reset_index(drop=True)
    with warnings.catch_warnings():
        # rows of the view may hold only NULLs in a column: their dtype must not decide the result's
        warnings.filterwarnings("ignore", "The behavior of DataFrame concatenation", FutureWarning)
        return pd.concat(found, ignore_index=True)


def _records(frame: pd.DataFrame) -> dict | None:
    if frame.empty:
        return None
    return {c: [json_safe(v) for v in frame[c].tolist()] for c in frame.columns}


def _clean(row: dict) -> dict:
    """A change-feed row without the change feed's own columns, its values JSON-safe."""
    return {k: json_safe(v) for k, v in row.items() if not k.startswith("_change_type") and k != "_commit_version"}


def _wids(windows: pd.DataFrame) -> list[str]:
    return [f"{s}:{o}" for s, o in zip(windows["wstart"].tolist(), windows["ordinal"].tolist())]


def _entries(windows: pd.DataFrame) -> Iterator[dict]:
    for s, e, n, o in zip(windows["wstart"].tolist(), windows["wend"].tolist(), windows["rows"].tolist(),
                          windows["ordinal"].tolist()):
        yield {"s": int(s), "e": int(e), "n": int(n), "o": int(o)}


def _shape(entry: dict) -> tuple:
    return entry["s"], entry["e"], entry["n"], entry["o"]


def _from_entries(entries: list[dict]) -> pd.DataFrame:
    if not entries:
        return empty_windows()
    n = len(entries)
    return window_frame([e["s"] for e in entries], [e["e"] for e in entries], [e["n"] for e in entries],
                  np.ones(n, bool), np.zeros(n, bool), ordinal=[e["o"] for e in entries])


def _holds(windows: pd.DataFrame, times: np.ndarray, *, inclusive: bool) -> np.ndarray:
    """Whether each window's time range holds one of ``times``."""
    if not len(times) or not len(windows):
        return np.zeros(len(windows), bool)
    times = np.sort(times)
    start, end = windows["wstart"].to_numpy(np.int64), windows["wend"].to_numpy(np.int64)
    return np.searchsorted(times, end, side="right" if inclusive else "left") > np.searchsorted(times, start)


def _spans(windows: pd.DataFrame, times: list[int], *, inclusive: bool) -> list[tuple[int, int]]:
    """The time span of every window holding one of ``times`` (a time in none: itself)."""
    spans = []
    starts, ends = windows["wstart"].to_numpy(np.int64), windows["wend"].to_numpy(np.int64)
    for t in times:
        inside = (starts <= t) & ((t <= ends) if inclusive else (t < ends))
        if inside.any():
            spans.append((int(starts[inside].min()), int(ends[inside].max()) - (0 if inclusive else 1)))
        else:
            spans.append((t, t))
    return spans

