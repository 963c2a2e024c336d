"""Nested windows (TDengine 3.4.2, ``WINDOW(<trigger> AS w_outer, ..., <leaf>)``): the leaf windows
of one group, found inside each window of the layers around them.

Each layer is scanned by the window core (:func:`.core.scan`) over the rows of one window of the
layer around it, so a leaf window never crosses an outer window's bounds and every layer keeps its
own semantics. When an outer window closes, the leaf windows still open in it are dropped, or, with
FLUSH_ON_OUTER_CLOSE, close with it (a COUNT_WINDOW short of its count, a STATE_WINDOW at its last
row). Time-based leaves (INTERVAL, SESSION) close as the group's watermark passes them, as direct
windows do. Outer windows never overlap (:mod:`airflow_stream_provider.sql.tdengine.nested`), so
each row belongs to one window of each layer.

The rows carry the columns every layer needs (:mod:`.core`); where two layers need the same column
(two STATE_WINDOW layers, ``_state``), layer ``i``'s is ``<column>@<i>``. The result holds the leaf
windows in :data:`.columns.WINDOW_COLUMNS` and, for each outer layer ``i``, ``outer<i>_wstart``,
``outer<i>_wend``, ``outer<i>_rows`` and ``outer<i>_closed``: the bounds the query reads as
``w_outer._twstart``, ``_twend`` and ``_twrownum``; column ``outer`` holds the same as JSON text
(``[[wstart, wend, rows, closed], ...]``), which the window events carry.
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd

from airflow_stream_provider.model.events import TriggerKind
from airflow_stream_provider.windows.columns import Windows, concat_windows
from airflow_stream_provider.windows.core import Chunk, scan_columns
from airflow_stream_provider.windows.spec import WindowSpec

#: the columns of an outer layer's window, after ``outer<i>_``
OUTER_FIELDS = ("wstart", "wend", "rows", "closed")


def layer_rows(rows: pd.DataFrame, layer: int) -> dict[str, np.ndarray]:
    """The columns of ``rows`` as layer ``layer`` reads them: ``<column>@<layer>`` in place of ``<column>``."""
    suffix = f"@{layer}"
    out = {str(c): rows[c].to_numpy() for c in rows.columns if "@" not in str(c)}
    out.update({str(c)[: -len(suffix)]: rows[c].to_numpy() for c in rows.columns if str(c).endswith(suffix)})
    return out


def scan_nested(outer: list[WindowSpec], leaf: WindowSpec, rows: pd.DataFrame, *, final: bool = False,
                flush: bool = False, watermark: int | None = None, tops: list | None = None) -> pd.DataFrame:
    """The leaf windows of one group's ``rows`` (sorted by ``ts``) inside the windows of the
    ``outer`` layers, outermost first.

    :param final: the table is complete: every window of every layer closes at its end.
    :param flush: FLUSH_ON_OUTER_CLOSE: a closed outer window closes the leaf windows open in it.
    :param watermark: event time up to which the group is complete (default: its last row's time).
    :param tops: when given, the outermost layer's windows that hold rows are appended to it, as
        (wstart, closed, index of the first row).
    """
    ts = rows["ts"].to_numpy(np.int64)
    if watermark is None and len(ts):
        watermark = int(ts[-1])
    scan = _Scan(outer, leaf, [layer_rows(rows, i) for i in range(len(outer) + 1)], ts, flush, watermark)
    scan.tops = tops
    scan.layer(0, 0, len(ts), final, ())
    n = sum(len(part) for part in scan.parts)
    extra: dict[str, np.ndarray] = {}
    for depth in range(len(outer)):
        for j, name in enumerate(OUTER_FIELDS):
            kind = bool if name == "closed" else np.int64
            values = [np.full(len(part), bounds[depth][j], kind) for part, bounds in zip(scan.parts, scan.bounds,
                                                                                         strict=True)]
            extra[f"outer{depth}_{name}"] = np.concatenate(values) if values else np.empty(n, kind)
    # (JSON) the outer windows, written once per part: every window of a part has the same ones
    texts = [np.full(len(part), json.dumps([list(b) for b in bounds]), object)
             for part, bounds in zip(scan.parts, scan.bounds, strict=True)]
    found = concat_windows(scan.parts, extra)
    found["outer"] = np.concatenate(texts) if texts else np.empty(0, object)
    return found


def outer_bounds(text: str | None) -> list[tuple[int, int, int, bool]]:
    """The outer windows of a leaf window from its JSON (column ``outer``); none for a direct window."""
    return [(int(a), int(b), int(c), bool(d)) for a, b, c, d in json.loads(text)] if text else []


def lineage_key(text: str | None) -> str | None:
    """What tells apart leaf windows that start together in different outer windows: the outer
    windows' starts (None: a direct window)."""
    return ",".join(str(bounds[0]) for bounds in outer_bounds(text)) if text else None


class _Scan:
    """One group's scan, layer by layer over index ranges of its columns (no frame per window)."""

    def __init__(self, outer: list[WindowSpec], leaf: WindowSpec, columns: list[dict[str, np.ndarray]],
                 ts: np.ndarray, flush: bool, watermark: int | None) -> None:
        self.specs = [*outer, leaf]
        self.columns = columns
        self.ts = ts
        self.flush = flush
        self.watermark = watermark
        self.parts: list[Windows] = []
        self.tops: list | None = None
        self.bounds: list[tuple] = []  # for each part: (wstart, wend, rows, closed) of each outer layer

    def windows(self, depth: int, lo: int, hi: int, final: bool) -> Windows:
        spec = self.specs[depth]
        chunk = Chunk({k: v[lo:hi] for k, v in self.columns[depth].items()}, hi - lo)
        mark = None if self.watermark is None else self.watermark - spec.watermark
        return scan_columns(spec, chunk, None, watermark=mark, final=final)[0]

    def tumbling(self, spec: WindowSpec, lo: int, hi: int, final: bool) -> tuple[np.ndarray, ...]:
        """An outer INTERVAL's windows that hold rows (an empty one holds no leaf), straight from the
        rows' window indices, which never overlap: (wstart, wend, rows, closed, first row, end row).
        A window closes as :mod:`.core` closes it: once the watermark reaches its end."""
        k = spec.window_indices(self.ts[lo:hi])
        if not len(k):
            return tuple(np.empty(0, np.int64) for _ in range(6))
        cuts = np.flatnonzero(np.diff(k)) + 1
        first = np.concatenate([[0], cuts]).astype(np.int64)
        end = np.concatenate([cuts, [len(k)]]).astype(np.int64)
        wstart, wend = spec.window_starts(k[first]), spec.window_ends(k[first])
        if final or self.watermark is None:
            closed = np.full(len(first), final)
        else:
            closed = wend <= self.watermark - spec.watermark
        return wstart, wend, end - first, closed, lo + first, lo + end

    def layer(self, depth: int, lo: int, hi: int, final: bool, around: tuple) -> None:
        spec = self.specs[depth]
        if depth == len(self.specs) - 1:
            found = self.windows(depth, lo, hi, final)
            if len(found):
                self.parts.append(found)
                self.bounds.append(around)
            return
        if spec.kind is TriggerKind.INTERVAL:
            wstart, wend, count, closed, starts, ends = self.tumbling(spec, lo, hi, final)
        else:
            found = self.windows(depth, lo, hi, final)
            wstart, wend, count, closed = (found.arrays[i] for i in range(4))
            # the rows of each window: its end is its last row (for STATE_WINDOW EXTEND(1), the
            # instant before the next window)
            ts = self.ts[lo:hi]
            starts = lo + np.searchsorted(ts, wstart, "left")
            ends = lo + np.searchsorted(ts, wend, "right")
        for i in range(len(wstart)):
            if ends[i] <= starts[i]:
                continue
            shut = bool(closed[i])
            if depth == 0 and self.tops is not None:
                self.tops.append((int(wstart[i]), shut, int(starts[i])))
            mark = len(self.parts)
            bounds = (*around, (int(wstart[i]), int(wend[i]), int(count[i]), shut))
            self.layer(depth + 1, int(starts[i]), int(ends[i]), final or (shut and self.flush), bounds)
            if shut and not (final or self.flush):  # an outer window that closed drops its open leaves
                for k in range(mark, len(self.parts)):
                    keep = self.parts[k].arrays[3].astype(bool)
                    self.parts[k] = Windows([a[keep] for a in self.parts[k].arrays])
