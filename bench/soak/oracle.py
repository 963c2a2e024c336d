"""The soak's oracle: the windows of each stream over a table's final rows, in pandas, independent of
the window engine."""

from __future__ import annotations

import pandas as pd

from bench.soak.spec import EVENT_CONDITIONS, Soaked

#: a window: (group, start in ms) -> (end in ms, or None for INTERVAL; average; maximum; count)
Windows = dict[tuple[str | None, int], tuple[int | None, float | None, float | None, int]]


def epoch_ms(column: pd.Series) -> pd.Series:
    return (pd.to_datetime(column, utc=True) - pd.Timestamp(0, tz="UTC")) // pd.Timedelta(milliseconds=1)


def _stats(v: pd.Series) -> tuple[float | None, float | None, int]:
    if v.empty:
        return None, None, 0
    return float(v.mean()), float(v.max()), len(v)


def _interval(ts: list[int], v: pd.Series, interval: int, sliding: int, watermark: int) -> dict[int, tuple]:
    """The closed windows ``[k·sliding, k·sliding + interval)`` from the first that holds the first row
    to the last whose end the group's latest row minus the watermark reached; empty ones included."""
    out: dict[int, tuple] = {}
    first, decided = ts[0], ts[-1] - watermark
    arr = pd.Series(ts)
    for k in range((first - interval) // sliding + 1, (decided - interval) // sliding + 1):
        start = k * sliding
        inside = (arr >= start) & (arr < start + interval)
        out[start] = (None, *_stats(v[inside.values]))
    return out


def _runs(ts: list[int], v: pd.Series, bounds: list[tuple[int, int]]) -> dict[int, tuple]:
    """Windows of rows ``[i, j]`` (positions, inclusive)."""
    return {ts[i]: (ts[j], *_stats(v.iloc[i:j + 1])) for i, j in bounds}


def window_bounds(spec: Soaked, rows: pd.DataFrame) -> list[tuple[int, int]]:
    """The closed windows of one group's rows (in time order), as (first, last) row positions."""
    ts = rows["t"].tolist()
    bounds: list[tuple[int, int]] = []
    if spec.kind == "session":
        (gap,) = spec.params
        start = 0
        for i in range(1, len(ts)):
            if ts[i] - ts[i - 1] > gap:
                bounds.append((start, i - 1))
                start = i
        return bounds  # the last session closes only when the watermark passes its last row by the gap
    if spec.kind == "state":
        st = rows["st"].tolist()
        start = 0
        for i in range(1, len(st)):
            if st[i] != st[i - 1]:
                bounds.append((start, i - 1))
                start = i
        return bounds  # the last run is still open
    if spec.kind == "event":
        opens, closes = EVENT_CONDITIONS[spec.name]
        begun = None
        for i, row in enumerate(rows.itertuples()):
            if begun is None:
                if opens(row):
                    begun = i
            elif closes(row):
                bounds.append((begun, i))
                begun = None
        return bounds
    if spec.kind in ("count", "notify"):
        (n,) = spec.params
        return [(i, i + n - 1) for i in range(0, len(ts) - n + 1, n)]
    raise ValueError(spec.kind)


def oracle_windows(spec: Soaked, table: pd.DataFrame) -> Windows:
    """The closed windows of ``spec`` over the final rows of its supertable ``table`` (columns ``t``
    in ms, ``v``, ``st``, ``tbname``), with the values the stream's query computes."""
    rows = table if spec.source == spec.over else table[table["tbname"] == spec.source]
    groups = rows.groupby("tbname") if spec.by_tbname else [(None, rows)]
    out: Windows = {}
    for group, part in groups:
        part = part.sort_values("t").reset_index(drop=True)
        if part.empty:
            continue
        ts = part["t"].tolist()
        if spec.kind == "interval":
            windows = _interval(ts, part["v"], *spec.params)
        else:
            windows = _runs(ts, part["v"], window_bounds(spec, part))
        out |= {(group, start): value for start, value in windows.items()}
    return out

