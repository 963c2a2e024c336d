"""The keys of a STATE_WINDOW (TDengine 3.3.8 and later: several keys, EXTEND, partly NULL keys) and
the JSON-safe values the scanners report states in.

A row whose keys are all NULL takes no part in a window (the rule of 3.3.7). A run of rows whose
keys are partly NULL joins the window before it, the window after it, or becomes a window of its
own, as :func:`resolve_partial` says; the run is decided by the next row with every key, so the
live scan keeps a run at the end of a batch waiting in its carry.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from airflow_stream_provider.windows.spec import WindowSpec


def json_safe(value: Any) -> Any:
    """A JSON-safe Python value from a numpy/pandas scalar."""
    if value is None:
        return None
    if isinstance(value, (np.generic,)):
        value = value.item()
    if isinstance(value, float) and np.isnan(value):
        return None
    if isinstance(value, pd.Timestamp):
        return int(value.value // 1000)
    if isinstance(value, (bytes, bytearray)):
        return value.hex()
    return value


def json_safe_values(values: np.ndarray) -> np.ndarray:
    """:func:`json_safe` of every value, as an object array."""
    out = np.empty(len(values), dtype=object)
    out[:] = values.tolist() if values.dtype.kind in "biu" else [json_safe(v) for v in values.tolist()]
    return out


def key_safe(value: Any) -> Any:
    """:func:`json_safe` of one key of a STATE_WINDOW of several: keys are integers, booleans or
    strings in TDengine, so a whole number read as a float (an integer column with NULLs) is an integer."""
    value = json_safe(value)
    return int(value) if isinstance(value, float) and value.is_integer() else value


def key_values(values: np.ndarray) -> list:
    """:func:`key_safe` of every value (integers and booleans are converted in one call)."""
    if values.dtype.kind in "biu":
        return values.tolist()
    return [key_safe(v) for v in values.tolist()]


def state_column(index: int) -> str:
    """The column of the ``index``-th STATE_WINDOW key in the rows a scanner reads."""
    return "_state" if index == 0 else f"_state{index}"


def state_key(value: object) -> object:
    """A carried state as the scanner compares it: a key of several is a tuple (JSON makes it a list)."""
    return tuple(value) if isinstance(value, list) else value


def state_rows(spec: WindowSpec, ts: np.ndarray, keys: list[np.ndarray], carry: dict, o: dict | None,
               final: bool) -> tuple[np.ndarray, list[np.ndarray]]:
    """The rows of a STATE_WINDOW of several keys that take part (``ts``, and each key's values in
    ``keys``), with the rows whose keys are partly NULL resolved (:func:`resolve_partial`). A row
    whose keys are all NULL takes no part; partly NULL rows at the end wait in ``carry["pending"]``
    for the next row with every key (or the end of the data, ``final``), which decides where they
    belong. ``o`` is the window the carry holds open."""
    pending = carry.pop("pending", None)
    if pending:
        ts = np.concatenate([np.array([p[0] for p in pending], np.int64), ts])
        keys = [np.concatenate([np.array([p[1][i] for p in pending], dtype=object), values.astype(object)])
                for i, values in enumerate(keys)]
    nulls: np.ndarray = np.stack([np.asarray(pd.isna(values), bool) for values in keys]) if len(ts) \
        else np.zeros((spec.state_keys, 0), bool)
    known = ~np.asarray(nulls.all(axis=0), bool)
    partial = np.asarray(nulls.any(axis=0), bool) & known
    if not partial.any():
        return ts[known], [values[known] for values in keys]
    ts, nulls, partial = ts[known], nulls[:, known], partial[known]
    keys = [values[known].astype(object) for values in keys]
    for values, null in zip(keys, nulls, strict=True):
        values[null] = None
    at = np.flatnonzero(partial)
    runs = np.split(at, np.flatnonzero(np.diff(at) > 1) + 1)
    end = len(ts)
    for run in runs:
        a, b = int(run[0]), int(run[-1])
        after = None if b + 1 >= len(ts) else tuple(key_safe(values[b + 1]) for values in keys)
        if after is None and not final:  # wait for the row that decides
            end = a
            carry["pending"] = [[int(ts[i]), [key_safe(values[i]) for values in keys]] for i in range(a, b + 1)]
            break
        before = (tuple(key_safe(values[a - 1]) for values in keys) if a > 0
                  else (o["state"] if o is not None else None))
        resolve_partial(spec.extend, keys, a, b, before, after)
    return ts[:end], [values[:end] for values in keys]


def resolve_partial(extend: int, keys: list[np.ndarray], a: int, b: int, before: tuple | None,
                     after: tuple | None) -> None:
    """Give the rows ``a..b`` (keys partly NULL, between rows with every key ``before`` and ``after``)
    the keys of the window they join, as TDengine decides (3.4.2): the run is cut where two of its rows
    disagree on a key; its first part joins the window before when their known keys agree (EXTEND 0
    and 1), its last part the window after (EXTEND 0 when it did not join the one before, and 2);
    any other part is a window of its own, its unknown keys NULL."""
    parts: list[tuple[int, int, list]] = []
    merged: list = [None] * len(keys)
    first = a
    for i in range(a, b + 1):
        row = [values[i] for values in keys]
        if any(v is not None and m is not None and key_safe(v) != m for v, m in zip(row, merged, strict=True)):
            parts.append((first, i - 1, merged))
            merged, first = [None] * len(keys), i
        merged = [m if v is None else key_safe(v) for v, m in zip(row, merged, strict=True)]
    parts.append((first, b, merged))

    def agrees(known: list, key: Sequence[object]) -> bool:
        return all(v is None or v == k for v, k in zip(known, key, strict=True))

    for index, (lo, hi, known) in enumerate(parts):
        key: Sequence[object] = known
        if index == 0 and extend in (0, 1) and before is not None and agrees(known, before):
            key = before
        elif index == len(parts) - 1 and extend in (0, 2) and after is not None and agrees(known, after):
            key = after
        for values, v in zip(keys, key, strict=True):
            values[lo:hi + 1] = v
