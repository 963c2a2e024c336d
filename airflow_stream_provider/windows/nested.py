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
``w_outer._twstart``, ``_twend`` and ``_twrownum``.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from airflow_stream_provider.model.events import TriggerKind
from airflow_stream_provider.windows.columns import empty_windows
from airflow_stream_provider.windows.core import scan
from airflow_stream_provider.windows.spec import WindowSpec

#: the columns of an outer layer's window, after ``outer<i>_``
OUTER_FIELDS = ("wstart", "wend", "rows", "closed")


def layer_rows(rows: pd.DataFrame, layer: int) -> pd.DataFrame:
    """The rows as layer ``layer`` reads them: ``<column>@<layer>`` in place of ``<column>``."""
    suffix = f"@{layer}"
    own = {c: c[: -len(suffix)] for c in rows.columns if c.endswith(suffix)}
    if not own:
        return rows
    kept = [c for c in rows.columns if "@" not in c and c not in own.values()]
    return pd.concat([rows[kept], rows[list(own)].rename(columns=own)], axis=1)


def _inside(spec: WindowSpec, ts: np.ndarray, wstart: int, wend: int) -> slice:
    """The rows of one outer window: INTERVAL's end is exclusive, the others' end is their last row
    (or, for STATE_WINDOW EXTEND(1), the instant before the next window)."""
    lo = int(np.searchsorted(ts, wstart, "left"))
    hi = int(np.searchsorted(ts, wend, "left" if spec.kind is TriggerKind.INTERVAL else "right"))
    return slice(lo, hi)


def scan_nested(outer: list[WindowSpec], leaf: WindowSpec, rows: pd.DataFrame, *, final: bool = False,
                flush: bool = False, watermark: int | None = None) -> pd.DataFrame:
    """The leaf windows of one group's ``rows`` (sorted by ``ts``) inside the windows of the
    ``outer`` layers, outermost first.

    :param final: the table is complete: every window of every layer closes at its end.
    :param flush: FLUSH_ON_OUTER_CLOSE: a closed outer window closes the leaf windows open in it.
    :param watermark: event time up to which the group is complete (default: its last row's time).
    """
    if watermark is None and len(rows):
        watermark = int(rows["ts"].iloc[-1])
    return _scan_layer(outer, leaf, 0, rows, final=final, flush=flush, watermark=watermark)


def _scan_layer(outer: list[WindowSpec], leaf: WindowSpec, depth: int, rows: pd.DataFrame, *, final: bool,
                flush: bool, watermark: int | None) -> pd.DataFrame:
    if depth == len(outer):
        spec = leaf
        found, _ = scan(spec, layer_rows(rows, depth), None, watermark=_mark(spec, watermark), final=final)
        return found
    spec = outer[depth]
    windows, _ = scan(spec, layer_rows(rows, depth), None, watermark=_mark(spec, watermark), final=final)
    ts = rows["ts"].to_numpy()
    parts = []
    for wstart, wend, count, closed in windows[["wstart", "wend", "rows", "closed"]].itertuples(index=False):
        inner = rows.iloc[_inside(spec, ts, int(wstart), int(wend))]
        if not len(inner):
            continue
        # an outer window that closed ends what is inside it: flushed, or dropped where still open
        found = _scan_layer(outer, leaf, depth + 1, inner, final=final or (bool(closed) and flush), flush=flush,
                            watermark=watermark)
        if bool(closed) and not (final or flush):
            found = found[found["closed"].astype(bool)]
        if not len(found):
            continue
        found = found.assign(**{f"outer{depth}_wstart": int(wstart), f"outer{depth}_wend": int(wend),
                                f"outer{depth}_rows": int(count), f"outer{depth}_closed": bool(closed)})
        parts.append(found)
    if not parts:
        out = empty_windows()
        for i in range(depth, len(outer)):
            for name in OUTER_FIELDS:
                out[f"outer{i}_{name}"] = pd.Series([], dtype=bool if name == "closed" else np.int64)
        return out
    return pd.concat(parts, ignore_index=True)


def _mark(spec: WindowSpec, watermark: int | None) -> int | None:
    return None if watermark is None else watermark - spec.watermark
