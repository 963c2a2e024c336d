"""The windows a scanner reports, as columns (:data:`WINDOW_COLUMNS`): :class:`Windows` as the
scanners return them, and frames of them, made without pandas' checks where a live batch makes many.

``wend`` is the exclusive end (start + interval) for INTERVAL windows, as in TDengine's
notifications, and the timestamp of the last row for the others. ``opened`` marks windows whose
opening is reported by the scan (with TRUE_FOR: the moment the window qualifies), ``closed``
windows that closed in it. ``outer`` is, for the leaf windows of nested windows, (JSON) the windows
of the layers around each one, outermost first (:mod:`.nested`); None for the others.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
from pandas.core.internals.construction import arrays_to_mgr

WINDOW_COLUMNS = (
    "wstart", "wend", "rows", "closed", "opened", "ordinal",
    "prev_state", "cur_state", "next_state",
    "open_index", "open_fields", "close_index", "close_fields", "outer",
)


def empty_windows() -> pd.DataFrame:
    """No windows, in the window columns (a copy of one frame built once: most scans of a live
    group find none, and a copy costs a small part of a new frame; it shares the empty columns,
    which a column set on it replaces)."""
    return _NO_WINDOWS.copy(deep=False)


class Windows:
    """Windows as the scanners find them: one array per column of :data:`WINDOW_COLUMNS`. The live
    detector scans each group of a batch, and stacks what the groups found into one frame
    (:func:`concat_windows`) instead of making a frame per group."""

    __slots__ = ("arrays",)

    def __init__(self, arrays: list[np.ndarray]) -> None:
        self.arrays = arrays

    def __len__(self) -> int:
        return len(self.arrays[0])

    def frame(self) -> pd.DataFrame:
        return _frame(self.arrays, len(self)) if len(self) else empty_windows()


def window_frame(wstart, wend, rows, closed, opened, **extra) -> pd.DataFrame:
    """Windows as a frame (:data:`WINDOW_COLUMNS`); the columns not given are empty."""
    return window_columns(wstart, wend, rows, closed, opened, **extra).frame()


def window_columns(wstart, wend, rows, closed, opened, **extra) -> Windows:
    """Windows as the scanners return them; the columns not given are empty."""
    n = len(wstart)
    if not n:  # the usual scan of a live group
        unknown = set(extra) - set(WINDOW_COLUMNS)
        if unknown:
            raise TypeError(f"unknown window columns {sorted(unknown)}")
        return NO_WINDOWS
    none = np.full(n, None, dtype=object)
    minus = np.full(n, -1, dtype=np.int64)
    data = {
        "wstart": np.asarray(wstart, np.int64),
        "wend": np.asarray(wend, np.int64),
        "rows": np.asarray(rows, np.int64),
        "closed": np.asarray(closed, bool),
        "opened": np.asarray(opened, bool),
        "ordinal": np.asarray(extra.pop("ordinal", np.zeros(n, np.int64)), np.int64),
        "prev_state": extra.pop("prev_state", none),
        "cur_state": extra.pop("cur_state", none),
        "next_state": extra.pop("next_state", none),
        "open_index": extra.pop("open_index", minus),
        "open_fields": extra.pop("open_fields", none),
        "close_index": extra.pop("close_index", minus),
        "close_fields": extra.pop("close_fields", none),
        "outer": extra.pop("outer", none),
    }
    if extra:
        raise TypeError(f"unknown window columns {sorted(extra)}")
    return Windows([np.asarray(data[c]) for c in WINDOW_COLUMNS])


def _frame(arrays: list[np.ndarray], n: int, columns: pd.Index | None = None) -> pd.DataFrame:
    """Windows from their columns, as they are. A live batch builds one such frame for each group
    with a window: pandas' constructor checks and copies every column and then merges columns of a
    type into blocks, which for a window or two costs several times what reading it back does, so
    the frame is made of the columns unmerged (merged later, if ever, by an operation that needs
    it). Through pandas' own constructor where its internals differ."""
    try:
        manager = arrays_to_mgr(arrays, _COLUMNS if columns is None else columns, pd.RangeIndex(n),
                                verify_integrity=False, typ="block", consolidate=False)
        return pd.DataFrame._from_mgr(manager, axes=manager.axes)
    except (TypeError, AttributeError):
        return pd.DataFrame._from_arrays(arrays, columns=_COLUMNS if columns is None else columns,
                                         index=pd.RangeIndex(n), verify_integrity=False)


_COLUMNS = pd.Index(WINDOW_COLUMNS)


#: the type of each of :data:`WINDOW_COLUMNS`
_KINDS = (np.int64, np.int64, np.int64, bool, bool, np.int64, object, object, object, np.int64, object, np.int64,
          object, object)
_NO_WINDOWS = pd.DataFrame({name: np.empty(0, kind) for name, kind in zip(WINDOW_COLUMNS, _KINDS, strict=True)},
                           columns=list(WINDOW_COLUMNS))
#: no windows (its arrays are read-only: it is shared)
NO_WINDOWS = Windows([np.empty(0, kind) for kind in _KINDS])
for _empty in NO_WINDOWS.arrays:
    _empty.flags.writeable = False


def concat_windows(parts: Sequence[pd.DataFrame | Windows], extra: dict[str, np.ndarray] | None = None) -> pd.DataFrame:
    """Windows of several scans in one frame, column by column (``pd.concat`` would check every value
    of the all-NULL object columns); ``extra``: more columns after the window columns, one value
    per window of the parts."""
    columns: list[list[np.ndarray]] = [[] for _ in WINDOW_COLUMNS]
    for part in parts:
        if not len(part):
            continue
        if isinstance(part, pd.DataFrame):
            if len(parts) == 1:
                return part
            arrays = [part[name].to_numpy() for name in WINDOW_COLUMNS]
        else:
            arrays = part.arrays
        for column, values in zip(columns, arrays, strict=True):
            column.append(values)
    if not columns[0]:
        out = empty_windows()
        for name, values in (extra or {}).items():
            out[name] = values
        return out
    merged = [np.concatenate(column) if len(column) > 1 else column[0] for column in columns]
    arrays = [values.astype(kind, copy=False) for values, kind in zip(merged, _KINDS, strict=True)]
    if not extra:
        return _frame(arrays, len(merged[0]))
    return _frame([*arrays, *extra.values()], len(merged[0]), pd.Index([*WINDOW_COLUMNS, *extra]))
