"""The shaped result of an IoTDB query: every window of the range a row, FILL (PREVIOUS, LINEAR, a
constant of a fitting type), ``ORDER BY TIME DESC``, LIMIT/OFFSET and SLIMIT/SOFFSET, applied to the
rows Spark computed, and the columns back in Arrow under IoTDB's headers.

Windows of ``GROUP BY ([start, end), interval[, step])`` are ``[start + k * step, + interval)`` inside
the range, each labelled by its start (by its end for ``((start, end], ...)``); every window is a
row, an empty one with NULLs (and count 0).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
import pyarrow as pa

from airflow_stream_provider import model as m
from airflow_stream_provider.warehouse.catalog import WarehouseError
from airflow_stream_provider.warehouse.series.store import TBNAME

TIME = "Time"
DEVICE = "Device"


@dataclass(frozen=True)
class Windows:
    start: int
    end: int
    interval: int
    step: int
    left_open: bool

    def starts(self) -> np.ndarray:
        count = max(0, -(-(self.end - self.start) // self.step))
        return self.start + np.arange(count, dtype=np.int64) * self.step


def complete_windows(df: pd.DataFrame, window: Windows, values: list[str], counts: list[int],
                      devices: list[str] | None = None) -> pd.DataFrame:
    """Every window of the range a row (per device of ``devices``), an empty one NULL but its counts 0."""
    starts = window.starts()
    if devices is None:
        grid = pd.DataFrame({"__key": starts})
        merged = grid.merge(df, on="__key", how="left")
    else:
        grid = pd.DataFrame({TBNAME: np.repeat(devices, len(starts)), "__key": np.tile(starts, len(devices)),
                             "__order": np.repeat(np.arange(len(devices)), len(starts))})
        merged = grid.merge(df.drop(columns=[c for c in ("__order",) if c in df.columns]), on=[TBNAME, "__key"],
                            how="left")
    for i in counts:
        merged[values[i]] = merged[values[i]].fillna(0).astype("int64")
    return merged


def time_column(keys: pd.Series, window: Windows | None) -> pa.Array:
    """The Time column: a window's start, or for ``((start, end], ...)`` its end (the range's end
    for a window the range cuts short)."""
    micros = keys.to_numpy(dtype=np.int64)
    if window is not None and window.left_open:
        micros = np.minimum(micros + window.interval, window.end)
    return pa.array(micros, pa.int64()).cast(pa.timestamp("us", tz="UTC"))


# --- shaping -------------------------------------------------------------------------------------


def apply_fill(df: pd.DataFrame, values: list[str], fill: m.SeriesFill, by: str | None = None) -> pd.DataFrame:
    """FILL on the shaped rows, per device under ALIGN BY DEVICE."""
    df = df.copy()
    groups = [df] if by is None else [g for _, g in df.groupby(by, sort=False)]
    for group in groups:
        for column in values:
            series = group[column]
            if fill.method == "previous":
                filled = series.ffill()
            elif fill.method == "linear":
                if not pd.api.types.is_numeric_dtype(series) or pd.api.types.is_bool_dtype(series):
                    continue
                filled = series.astype("float64")
                inside = filled.ffill().notna() & filled.bfill().notna()
                interpolated = pd.Series(np.interp(group["__key"], group["__key"][filled.notna()],
                                                   filled[filled.notna()]) if filled.notna().any() else filled,
                                         index=group.index)
                filled = filled.where(filled.notna() | ~inside, interpolated)
            else:
                if not _fits(fill.value, series):
                    continue
                filled = series.where(series.notna(), fill.value)
            df.loc[group.index, column] = filled
    return df


def _fits(value: object, series: pd.Series) -> bool:
    """Whether a FILL constant fits a column (IoTDB: a boolean fills BOOLEAN, a number fills
    numbers, a string fills TEXT; an integer constant beyond INT32 does not fill INT32)."""
    if pd.api.types.is_bool_dtype(series):
        return isinstance(value, bool)
    if pd.api.types.is_numeric_dtype(series):
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return False
        if pd.api.types.is_integer_dtype(series) and not float(value).is_integer():
            return False
        return not (series.dtype == np.int32 and isinstance(value, int) and not -(2**31) <= value < 2**31)
    return True


def paginate(df: pd.DataFrame, query: m.SeriesQuery) -> pd.DataFrame:
    if query.descending:
        sort = ["__order", "__key"] if "__order" in df.columns else ["__key"]
        df = df.sort_values(sort, ascending=[True, False] if len(sort) == 2 else [False], kind="stable")
    elif "__order" in df.columns:
        df = df.sort_values(["__order", "__key"], kind="stable")
    start = query.offset
    stop = None if query.limit is None else start + query.limit
    return df.iloc[start:stop]


def slimit(table: pa.Table, query: m.SeriesQuery, fixed: int) -> pa.Table:
    if query.slimit is None and not query.soffset:
        return table
    values = table.column_names[fixed:]
    if query.soffset and query.soffset >= len(values):
        raise WarehouseError(f"the value of SOFFSET ({query.soffset}) is equal to or exceeds the number of series "
                             f"({len(values)}) that can actually be returned")
    stop = None if query.slimit is None else query.soffset + query.slimit
    return table.select(table.column_names[:fixed] + values[query.soffset:stop])


def arrow(values: pd.Series, dtype: pa.DataType | None) -> pa.Array:
    """A shaped column back in Arrow, in its query type; pandas' NaN for a missing value is NULL."""
    try:
        return pa.array(values, type=dtype, from_pandas=True)
    except (pa.ArrowInvalid, pa.ArrowTypeError):  # an integer column holding NaN as floats
        return pa.array([None if pd.isna(v) else v for v in values.tolist()], type=dtype)


def unique_headers(names: list[str]) -> list[str]:
    """Headers as IoTDB prints them; a repeated one gets ``#2``, ``#3``... so Arrow keeps each."""
    seen: dict[str, int] = {}
    out = []
    for name in names:
        seen[name] = seen.get(name, 0) + 1
        out.append(name if seen[name] == 1 else f"{name}#{seen[name]}")
    return out


def empty_by_device(headers: list[str], without_time: bool) -> pa.Table:
    out = {} if without_time else {TIME: pa.array([], pa.timestamp("us", tz="UTC"))}
    return pa.table({**out, DEVICE: pa.array([], pa.string()), **{h: pa.array([], pa.null()) for h in headers}})


def empty_by_time(headers: list[str], with_time: bool) -> pa.Table:
    out = {TIME: pa.array([], pa.timestamp("us", tz="UTC"))} if with_time else {}
    return pa.table({**out, **{h: pa.array([], pa.null()) for h in headers}})
