"""Expected windows of the attached-table tests, worked out in pandas from a table's rows."""

from __future__ import annotations

import pandas as pd

WINDOW_S = 10


def closed_windows(rows: pd.DataFrame) -> dict[tuple[str, pd.Timestamp], tuple[float, float, int]]:
    """(device, window start) -> (avg voltage, sum current, count) of every 10 s window a later row of
    the same device has closed (INTERVAL(10s) SLIDING(10s), no watermark), from the device's first
    window on; an empty window triggers too (its average and sum are NULL, its count 0)."""
    rows = rows.copy()
    rows["event_time"] = pd.to_datetime(rows["event_time"], utc=True)
    rows["start"] = rows["event_time"].dt.floor(f"{WINDOW_S}s")
    out = {}
    for device, group in rows.groupby("device_id"):
        latest = group["event_time"].max()
        step = pd.Timedelta(seconds=WINDOW_S)
        start = group["start"].min()
        while start + step <= latest:
            window = group[group["start"] == start]
            out[(device, start)] = ((float(window["voltage"].mean()), float(window["current"].sum()), len(window))
                                    if len(window) else (None, None, 0))
            start += step
    return out
