"""One group's batch in the live detector for nested windows (TDengine 3.4.2,
``WINDOW(<trigger> AS w_outer, ..., <leaf>)``): :class:`NestedStep`.

A leaf window never crosses its outer window's bounds, and an outer window decides what happens to
the leaves still open in it when it closes (dropped, or closed with it under FLUSH_ON_OUTER_CLOSE).
So the group's state keeps the rows of its outermost windows still open (the last one, when all are
closed) and each batch scans them again, layer by layer (:func:`.nested.scan_nested`), with the new
rows: the state is bounded by the open outer windows and the WATERMARK span. What the scan finds is
reported once: a leaf window's opening when it is first seen, its close when it is first seen closed
(by its start, its ordinal and the starts of its outer windows, as its trigger id).

Late rows and updates (not under IGNORE_DISORDER), and deletes under DELETE_RECALC, recompute the
outer windows they fall in: the state remembers the last :data:`HISTORY` closed outermost windows and
the leaf windows reported closed in them; the group's rows are read back from the trigger table from
the outer window holding the earliest change, scanned again, and a leaf window reported closed that
no longer holds, or holds other rows, gets a ``WINDOW_INVALIDATION`` and, where it still exists, its
new close. A change before the remembered windows is dropped, as an expired row is (counted in
``dropped``), unless the group never had a window before it (then its windows are found from it).
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd

from airflow_stream_provider.values import json_default
from airflow_stream_provider.windows.columns import window_columns
from airflow_stream_provider.windows.late import read_group
from airflow_stream_provider.windows.nested import lineage_key, scan_nested
from airflow_stream_provider.windows.step import Advanced, sort_rows
from airflow_stream_provider.windows.trigger_plan import TriggerPlan, micros

#: closed outermost windows a group remembers for late rows (with the leaf windows closed in them)
HISTORY = 8


def window_key(start: int, ordinal: int, outer: str | None) -> str:
    """A leaf window's identity: its start, ordinal and outer windows' starts (as its trigger id)."""
    return f"{lineage_key(outer)}|{start}|{ordinal}"


class NestedStep:
    """One group's batch of a stream of nested windows: its retained rows and the new ones through
    :func:`.nested.scan_nested`, what was not reported before reported (see the module)."""

    def __init__(self, plan: TriggerPlan, *, timeouts: bool) -> None:
        self.plan = plan
        self.timeouts = timeouts

    def ready(self, *_args) -> None:
        """Never the fast road: every batch rescans the open outer windows."""
        return None

    def advance(self, key: tuple, raw: pd.DataFrame | None, text: str | None, now_ms: int) -> Advanced:
        plan, ts = self.plan, self.plan.ts_column
        saved = json.loads(text) if text is not None else {}
        if raw is None or not len(raw):
            return Advanced(text or json.dumps(saved), None, [])
        decided, max_ts = saved.get("decided"), saved.get("max_ts")
        rows = pd.DataFrame(saved["rows"]) if saved.get("rows") else None
        history: list[list[int]] = saved.get("history", [])  # closed outermost windows: [start, first row]
        times = micros(raw[ts])
        raw = raw.assign(**{ts: times})
        data, late, drop, max_ts = sort_rows(plan, raw, times, decided, max_ts)
        retained_from = int(rows[ts].min()) if rows is not None and len(rows) else None
        rescan_from = None
        changed = late & ~drop
        if changed.any():
            low = int(times[changed].min())
            before = [first for _, first in history if first <= low]
            if before:
                rescan_from = max(before)
            elif saved.get("trimmed"):  # older than every window remembered
                old = changed & (times < (history[0][1] if history else retained_from or low))
                drop |= old
                changed &= ~old
                rescan_from = (history[0][1] if history else retained_from) if changed.any() else None
            else:
                rescan_from = low
        if (drop & data).any():
            saved["dropped"] = saved.get("dropped", 0) + int((drop & data).sum())
        if rescan_from is not None:  # the table at this batch's version holds every change
            rows = read_group(plan, tuple(key) if plan.keys else (), int(raw["_commit_version"].max()),
                              rescan_from, int(times.max()) if max_ts is None else max_ts)[list(plan.columns)]
            saved["recalculations"] = saved.get("recalculations", 0) + 1
        else:
            rows = _merge(plan, rows, raw[~drop])
        assert max_ts is not None or not len(rows)
        if not len(rows) or max_ts is None:
            saved.update(rows=None, max_ts=max_ts)
            return Advanced(json.dumps(saved, default=json_default), None, [])
        watermark = max_ts - plan.spec.watermark
        ready = rows[rows[ts].to_numpy(np.int64) <= watermark]
        prepared = plan.prepare(ready)
        tops: list[tuple[int, bool, int]] = []
        found = scan_nested([layer.spec for layer in plan.outer], plan.spec, prepared, flush=plan.flush,
                            watermark=max_ts, tops=tops)
        parts = self._report(saved, found, tops, rescan_from is not None)
        # keep the rows from the first outermost window still open (the last one when all closed),
        # and the rows not yet behind the watermark
        first_ts = prepared["ts"].to_numpy(np.int64)
        keep_from = None
        if tops:
            first_open = next((t for t in tops if not t[1]), tops[-1])
            keep_from = int(first_ts[first_open[2]])
            for wstart, closed, first in tops:
                if closed and int(first_ts[first]) < keep_from and plan.recalculates and \
                        (not history or history[-1][0] < wstart):
                    history.append([wstart, int(first_ts[first])])
        if len(history) > HISTORY:
            history = history[-HISTORY:]
            saved["trimmed"] = True
        kept = rows if keep_from is None else rows[(rows[ts].to_numpy(np.int64) >= keep_from)
                                                   | (rows[ts].to_numpy(np.int64) > watermark)]
        oldest = history[0][0] if history else (min(t[0] for t in tops if int(first_ts[t[2]]) >= (keep_from or 0))
                                                if tops else None)
        if oldest is not None:
            saved["closed"] = {k: v for k, v in saved.get("closed", {}).items() if v[4] >= oldest}
        saved.update(rows=_records(kept.reset_index(drop=True), plan.columns), decided=watermark, max_ts=max_ts,
                     history=history)
        return Advanced(json.dumps(saved, default=json_default), None, parts)

    def _report(self, saved: dict, found: pd.DataFrame, tops: list, rescanned: bool) -> list[tuple[str, object]]:
        """What ``found`` (every leaf window of the retained rows) adds to what was reported:
        openings and closes not reported before, and (``rescanned``: rows changed) invalidations of
        closes that no longer hold. Updates ``saved``'s ``opened`` and ``closed``."""
        opened_before = set(saved.get("opened", []))
        closed_before: dict[str, list] = saved.get("closed", {})
        starts = found["wstart"].to_numpy(np.int64)
        ordinals = found["ordinal"].to_numpy(np.int64)
        outers = found["outer"].to_numpy(object)
        keys = [window_key(s, o, line) for s, o, line in zip(starts.tolist(), ordinals.tolist(), outers, strict=True)]
        is_closed = found["closed"].to_numpy(bool)
        is_opened = found["opened"].to_numpy(bool)
        signature = list(zip(found["wend"].tolist(), found["rows"].tolist(), strict=True))
        new_open = np.array([o and k not in opened_before and k not in closed_before
                             for k, o in zip(keys, is_opened, strict=True)], bool)
        new_close = np.array([c and (k not in closed_before or tuple(closed_before[k][1:3]) != sig)
                              for k, c, sig in zip(keys, is_closed, signature, strict=True)], bool)
        parts: list[tuple[str, object]] = []
        if rescanned and tops:
            low = min(t[0] for t in tops)
            now_closed = {k: sig for k, c, sig in zip(keys, is_closed, signature, strict=True) if c}
            gone = [(k, v) for k, v in closed_before.items() if v[4] >= low and now_closed.get(k) != tuple(v[1:3])]
            if gone:
                parts.append(("invalidate", window_columns(
                    [v[0] for _, v in gone], [v[1] for _, v in gone], [v[2] for _, v in gone],
                    np.ones(len(gone), bool), np.zeros(len(gone), bool), ordinal=[v[3] for _, v in gone],
                    outer=np.array([v[5] for _, v in gone], object)).frame()))
                for k, _ in gone:
                    closed_before.pop(k)
        report = new_open | new_close
        if report.any():
            out = found[report].copy()
            out["opened"] = new_open[report]
            out["closed"] = new_close[report]
            parts.append(("windows", out.reset_index(drop=True)))
        for i in np.flatnonzero(is_closed).tolist():  # [start, end, rows, ordinal, outermost start, outer]
            closed_before[keys[i]] = [int(starts[i]), signature[i][0], signature[i][1], int(ordinals[i]),
                                      json.loads(outers[i])[0][0], outers[i]]
        saved["closed"] = closed_before
        saved["opened"] = [k for k, c in zip(keys, is_closed, strict=True) if not c]
        return parts


def _merge(plan: TriggerPlan, rows: pd.DataFrame | None, changes: pd.DataFrame) -> pd.DataFrame:
    """The retained rows with ``changes`` applied: the last value of each row wins, a delete
    removes the row."""
    frames = [changes.assign(_order=1)]
    if rows is not None and len(rows):
        frames.insert(0, rows.assign(_change_type="insert", _commit_version=-1, _order=0))
    merged = pd.concat(frames, ignore_index=True)
    merged = merged[merged["_change_type"] != "update_preimage"]
    merged = merged.sort_values(["_order", "_commit_version"], kind="stable").drop_duplicates(list(plan.row_key),
                                                                                           keep="last")
    merged = merged.loc[merged["_change_type"] != "delete", list(plan.columns)]
    return merged.sort_values(plan.ts_column, kind="stable").reset_index(drop=True)


def _records(frame: pd.DataFrame, columns: tuple[str, ...]) -> dict | None:
    if frame.empty:
        return None
    return {c: [v.item() if hasattr(v, "item") else v for v in frame[c].tolist()] for c in columns}
