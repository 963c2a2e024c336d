"""Recalculation: what late rows, updates and deletes change in windows a group already decided.

A change is *late* when its time is at or before the group's decided time (the watermark of its
last scan): the windows there were already reported. The group's rows are read back from the
trigger table (delta-rs, at the batch's commit version) from a *safe point* before the earliest
change: a place where the window core's carry is known without scanning history (the start of the
affected INTERVAL window, a SESSION gap, a STATE change, the row after an EVENT end). The rows as
they stood before the changes are the same rows with every changed row taken back to its first
pre-image (or removed, when it was first inserted by these changes). Both versions are scanned from
the safe point up to the decided time; windows that differ become ``WINDOW_INVALIDATION`` (old) and
``WINDOW_CLOSE`` (new) events, and the new scan's carry replaces the group's.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.dataset as ds
from deltalake import DeltaTable

from airflow_stream_provider.model.events import TriggerKind
from airflow_stream_provider.warehouse import mapping, snapshots
from airflow_stream_provider.warehouse.features import features_of
from airflow_stream_provider.windows import rollup
from airflow_stream_provider.windows.columns import WINDOW_COLUMNS
from airflow_stream_provider.windows.core import json_safe, scan
from airflow_stream_provider.windows.state_keys import state_column
from airflow_stream_provider.windows.trigger_plan import TriggerPlan, micros

#: change-feed row kinds that carry a row's new value, and the ones that carry an old value
DATA_CHANGES = ("insert", "update_postimage")
OLD_VALUES = ("update_preimage", "delete")
_FIRST = {"update_preimage": 0, "delete": 0, "insert": 1, "update_postimage": 1}

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_LOOKBACK = 60_000_000  # first look this far before the earliest change for a safe point (doubles)
_SIGNATURE = [c for c in WINDOW_COLUMNS if c not in ("opened", "closed")]


@dataclass(frozen=True)
class Recalculation:
    invalidate: pd.DataFrame  # closed windows reported before that no longer hold
    windows: pd.DataFrame  # windows to report now: recomputed closes, newly opened windows
    carry: dict | None  # the group's carry at the decided time, with the changes applied
    start: int  # the safe point the rescan started from
    old: pd.DataFrame | None = None  # the windows of the rows as they were, from the safe point


def read_group(plan: TriggerPlan, key_values: tuple, version: int, lo: int, hi: int) -> pd.DataFrame:
    """Rows of one group with ``lo <= ts <= hi`` (microseconds) in the trigger table at ``version``."""
    if plan.since is not None:
        lo = max(lo, plan.since)
    (ts,) = mapping.sources(plan.path, [plan.ts_column])  # an attached table's own column names
    dataset = _dataset(plan.path, version, ts, lo, hi)
    ts_type = dataset.schema.field(ts).type
    cond = (ds.field(ts) >= stamp(lo, ts_type)) & (ds.field(ts) <= stamp(hi, ts_type))
    read = dataset.to_table(columns=mapping.sources(plan.path, plan.columns), filter=cond)
    rows = mapping.arrow(plan.path, read).to_pandas()
    # the group's rows (in pandas: delta-rs scans strings as string_view, which arrow filters can't compare)
    keep = np.ones(len(rows), bool)
    for name, value in zip(plan.keys, key_values):
        value = json_safe(value)
        if plan.rollup:  # the rows of every subtable under the group's path, the tag naming the group
            keep &= rollup.member_mask(rows[name], value)
            rows[name] = value
            continue
        keep &= rows[name].isna().to_numpy() if value is None else (rows[name] == value).to_numpy(bool)
    if plan.subtable is not None:
        keep &= (rows["tbname"] == plan.subtable).to_numpy(bool)
    rows = rows[keep].reset_index(drop=True)
    rows[plan.ts_column] = micros(rows[plan.ts_column])
    return rows


def _dataset(path: str, version: int, ts: str, lo: int, hi: int) -> ds.Dataset:
    """The table at ``version``, of which rows from ``lo`` to ``hi`` are read: a table of plain files
    is their dataset (kept: a batch's late rows read back many groups at one version); one with
    deletion vectors or column mapping, the kernel's scan of that span."""
    found = _files_dataset(path, version)
    if found is not None:
        return found
    return snapshots.dataset(path, version, between=(ts, _instant(lo), _instant(hi)))


def _instant(value: int) -> datetime | None:
    """Microseconds since the epoch as an aware instant (None: beyond what a datetime holds)."""
    try:
        return _EPOCH + timedelta(microseconds=value)
    except OverflowError:
        return None


@functools.lru_cache(maxsize=8)
def _files_dataset(path: str, version: int) -> ds.Dataset | None:
    table = DeltaTable(path, version=version)
    return table.to_pyarrow_dataset() if features_of(table).pyarrow_reads else None


def stamp(value: int, kind: pa.DataType) -> pa.Scalar:
    """Microseconds since the epoch as a scalar of a time column's Arrow type (of another type: as it is)."""
    if pa.types.is_timestamp(kind):
        per_micro = {"s": 1_000_000, "ms": 1_000, "us": 1, "ns": 1}[kind.unit]
        scaled = value * 1000 if kind.unit == "ns" else value // per_micro
        return pa.scalar(scaled, type=kind)
    return pa.scalar(value, type=kind)


def first_values(plan: TriggerPlan, changes: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The keys ``changes`` touch, and the rows as they were before them (changed rows that
    existed already, with their old values)."""
    order = changes.assign(_first=changes["_change_type"].map(_FIRST))
    order = order.sort_values(["_commit_version", "_first"], kind="stable")
    first = order.drop_duplicates(list(plan.row_key), keep="first")
    before = first[first["_change_type"].isin(OLD_VALUES)]
    return first[list(plan.row_key)], before[list(plan.columns)]


def _without(rows: pd.DataFrame, keys: pd.DataFrame, row_key: tuple[str, ...]) -> pd.DataFrame:
    """``rows`` except those whose row key is in ``keys`` (timestamps in microseconds on both sides)."""
    if rows.empty or keys.empty:
        return rows
    gone = pd.MultiIndex.from_frame(keys[list(row_key)].astype(object))
    return rows[~pd.MultiIndex.from_frame(rows[list(row_key)].astype(object)).isin(gone)]


#: reads a group's raw rows ``lo <= ts <= hi`` (microseconds) at a table version
Reader = Callable[[int, int, int], pd.DataFrame]


def safe_point(plan: TriggerPlan, key_values: tuple, version: int, earliest: int,
               first_ts: int | None, read: Reader | None = None) -> tuple[int, dict | None]:
    """A time at or before ``earliest`` from which a scan with the returned carry decides the same
    windows as a scan of the group's whole history.

    :param read: how the group's rows are read (default: the trigger table, by :func:`read_group`).
    """
    spec = plan.spec
    if spec.kind is TriggerKind.INTERVAL:
        k0 = spec.first_window(earliest)
        return int(spec.window_starts(np.array([k0]))[0]), {"lo": int(k0), "counts": {}}
    if read is None:
        def read(at: int, lo: int, hi: int) -> pd.DataFrame:
            return read_group(plan, key_values, at, lo, hi)
    span = max(_LOOKBACK, 2 * spec.gap)
    if spec.start_limit is not None or spec.end_limit is not None:
        # an EVENT_WINDOW with TRUE_FOR streaks: no row alone proves that no window or streak is under
        # way there, so the group is rescanned from its first row
        return (min(first_ts, earliest) if first_ts is not None else earliest - span), None
    while True:
        lo = earliest - span
        rows = plan.prepare(read(version, lo, earliest - 1))
        found = _break(spec.kind, spec.gap, rows, spec.state_keys)
        if found is not None:
            return found
        if first_ts is None or lo <= first_ts or (plan.since is not None and lo <= plan.since):
            return lo, None  # the whole history of the group is in reach
        span *= 4


def _break(kind: TriggerKind, gap: int, rows: pd.DataFrame, state_keys: int = 1) -> tuple[int, dict | None] | None:
    """The latest place in ``rows`` (prepared, in time order) where no window is open."""
    ts = rows["ts"].to_numpy(np.int64)
    if kind is TriggerKind.SESSION:
        cut = np.flatnonzero(np.diff(ts) > gap)
        return (int(ts[cut[-1] + 1]), None) if len(cut) else None
    if kind is TriggerKind.STATE_WINDOW:
        # a change of keys between two rows that have every key (partly NULL rows decide their window
        # by the rows around them, so no break falls next to one)
        keys = [rows[state_column(k)].to_numpy(object) for k in range(state_keys)]
        known = ~np.stack([np.asarray(pd.isna(values), bool) for values in keys]).all(axis=0)
        ts, keys = ts[known], [values[known] for values in keys]
        full = ~np.asarray(np.stack([np.asarray(pd.isna(values), bool) for values in keys]).any(axis=0), bool)
        differ = np.zeros(max(len(ts) - 1, 0), bool)
        for values in keys:
            differ |= values[1:] != values[:-1]
        changed = np.flatnonzero(differ & (ts[1:] > ts[:-1]) & full[1:] & full[:-1])
        if not len(changed):
            return None
        i = int(changed[-1]) + 1
        prev = [json_safe(values[i - 1]) for values in keys]
        return int(ts[i]), {"open": None, "prev": prev[0] if state_keys == 1 else prev, "prev_last": int(ts[i - 1])}
    if kind is TriggerKind.EVENT_WINDOW:
        # after a row whose end condition holds no window is open, whatever came before: an open
        # window closes there, and a window the row itself opens closes at once
        last_at_ts = np.append(ts[1:] > ts[:-1], True)
        ends = np.flatnonzero(rows["_end"].fillna(False).to_numpy(bool) & last_at_ts)
        return (int(ts[ends[-1]]) + 1, {"open": None}) if len(ends) else None
    return None  # COUNT_WINDOW: windows are counted from the group's first row


def recalculate_group(plan: TriggerPlan, key_values: tuple, changes: pd.DataFrame, *, version: int, decided: int,
                first_ts: int | None) -> Recalculation:
    """Rescan a group whose decided windows ``changes`` (late change-feed rows, all at or before
    ``decided``, timestamps in microseconds) may alter. The table is read at ``version``, which
    holds all of them."""
    earliest = int(micros(changes[plan.ts_column]).min())
    start, carry = safe_point(plan, key_values, version, earliest, first_ts)
    now_raw = read_group(plan, key_values, version, start, decided)
    keys, before = first_values(plan, changes)
    then_raw = pd.concat([_without(now_raw, keys, plan.row_key), before], ignore_index=True)
    return rescan(plan, then_raw, now_raw, start=start, carry=carry, decided=decided, first_ts=first_ts,
                  earliest=earliest, touched=micros(changes[plan.ts_column]))


def rescan(plan: TriggerPlan, then_raw: pd.DataFrame, now_raw: pd.DataFrame, *, start: int, carry: dict | None,
           decided: int, first_ts: int | None, earliest: int, touched: np.ndarray) -> Recalculation:
    """Scan a group's rows from a safe point (``start``, with ``carry``) up to ``decided``, as they
    were (``then_raw``) and as they are (``now_raw``), and say which windows changed.

    :param earliest: the earliest changed time; ``touched``: every changed time.
    """
    spec = plan.spec
    old_carry = carry
    if spec.kind is TriggerKind.INTERVAL and first_ts is None:
        # no row was scanned yet (the group's first rows were still waiting for the watermark):
        # no window was ever due, empty ones included
        old_carry = {"lo": None, "counts": {}}
    elif spec.kind is TriggerKind.INTERVAL and first_ts is not None and earliest < first_ts:
        # the group's windows used to begin at its first row; empty windows before it were never due
        k_first = spec.first_window(first_ts)
        old_carry = {"lo": int(k_first), "counts": {}}
        then_raw = then_raw[micros(then_raw[plan.ts_column]) >= int(spec.window_starts(np.array([k_first]))[0])]
    then_rows, now_rows = plan.prepare(then_raw), plan.prepare(now_raw)
    old, _ = scan(spec, then_rows, old_carry, watermark=decided)
    new, new_carry = scan(spec, now_rows, carry, watermark=decided)
    invalidate, report = changed(old, new, touched, end_inclusive=spec.kind is not TriggerKind.INTERVAL)
    return Recalculation(invalidate=invalidate, windows=report, carry=new_carry, start=start, old=old)


def changed(old: pd.DataFrame, new: pd.DataFrame, touched: np.ndarray | None = None, *,
            end_inclusive: bool = True) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(closed windows of ``old`` to invalidate, windows of ``new`` to report): a closed window
    that differs in any field is reported again; an opening only if ``old`` had none.

    A closed window that holds a changed row (a time in ``touched``) is recomputed even when its
    fields stand as they were: an update of a value moves no boundary and no count, but the
    window's result changes (reference 000, "Data Updates": updates are out-of-order data and are
    recalculated). It is invalidated and closes again with the same trigger id, so the output row
    is written again and a receiver sees that the close it has is replaced.

    :param end_inclusive: ``wend`` is the window's last row (every kind but INTERVAL, whose
        ``wend`` is the exclusive end).
    """
    def sig(frame: pd.DataFrame) -> np.ndarray:
        if not len(frame):
            return np.array([], dtype=object)
        return frame[_SIGNATURE].astype(str).agg("\x1f".join, axis=1).to_numpy(object)

    old_closed, new_closed = old[old["closed"]], new[new["closed"]]
    old_sig, new_sig = sig(old_closed), sig(new_closed)
    same = set(new_sig) & set(old_sig)
    holds = _holds(new_closed, touched, end_inclusive)
    recomputed = {s for s, hit in zip(new_sig, holds) if hit and s in same}
    gone = old_closed[np.array([s not in same or s in recomputed for s in old_sig], dtype=bool)]
    opened_before = set(zip(old.loc[old["opened"], "wstart"], old.loc[old["opened"], "ordinal"]))
    report = new.copy()
    reported = set(old_sig) - recomputed
    report["closed"] = report["closed"] & np.array([s not in reported for s in sig(report)], dtype=bool)
    report["opened"] = report["opened"] & np.array(
        [(s, o) not in opened_before for s, o in zip(report["wstart"], report["ordinal"])], dtype=bool)
    report = report[report["closed"] | report["opened"]]
    return gone.reset_index(drop=True), report.reset_index(drop=True)


def _holds(windows: pd.DataFrame, touched: np.ndarray | None, end_inclusive: bool) -> np.ndarray:
    """Whether each window's time range holds one of the times ``touched``."""
    if touched is None or not len(touched) or not len(windows):
        return np.zeros(len(windows), bool)
    times = np.sort(np.asarray(touched, np.int64))
    start, end = windows["wstart"].to_numpy(np.int64), windows["wend"].to_numpy(np.int64)
    first = np.searchsorted(times, start, side="left")
    past = np.searchsorted(times, end, side="right" if end_inclusive else "left")
    return past > first
