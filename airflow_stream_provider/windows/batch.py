"""Batch mode: the window core over a whole Spark DataFrame, all groups in one Spark job.

Used for history (FILL_HISTORY), recalculation and checks. Each group's rows go to one Python
call that scans them in time order, exactly as the streaming detector would have, and returns the
group's events.

INTERVAL windows over finished data (``final``, no PRE_FILTER) take a shorter road: Spark counts
the rows of every window natively and only the counts go to Python, where the same core code
(:func:`.core.interval_windows`) turns them into windows.
"""

from __future__ import annotations

import pandas as pd
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from airflow_stream_provider.windows.core import first_window, interval_windows, scan
from airflow_stream_provider.windows.events import (
    EVENT_COLUMNS,
    EVENT_SCHEMA,
    empty_events,
    event_rows,
)
from airflow_stream_provider.windows.trigger import TriggerPlan


def detect(df: DataFrame, plan: TriggerPlan, *, final: bool = False) -> DataFrame:
    """Window events of ``df`` (raw rows of the trigger table).

    :param final: treat the data as finished, closing every window as a query does; otherwise
        windows close only where the data proves it (watermark, next state, end condition), as the
        streaming detector would see them after reading the same rows.
    """
    df = df.select(*plan.columns)
    if plan.subtable is not None:
        df = df.where(F.col("tbname") == plan.subtable)
    if plan.since is not None:
        df = df.where(F.col(plan.ts_column) >= F.timestamp_micros(F.lit(plan.since)))
    if final and plan.spec.kind == "interval" and plan.pre_filter is None:
        return _interval_counts(df, plan)
    return scan_groups(df, plan, final=final)


def scan_groups(df: DataFrame, plan: TriggerPlan, *, final: bool = False) -> DataFrame:
    """Batch mode row by row: every group's rows through the window core (any trigger type)."""

    def fn(raw):  # no type hints: Spark would read them as a UDF eval type
        return group_events(plan, raw, final=final)[list(EVENT_COLUMNS)]

    grouped = df.groupBy(*plan.keys) if plan.keys else df.groupBy(F.lit(0).alias("_all"))
    return grouped.applyInPandas(fn, schema=EVENT_SCHEMA)


def group_events(plan: TriggerPlan, raw: pd.DataFrame, *, final: bool = False) -> pd.DataFrame:
    """The events of one group's raw rows (all rows share the PARTITION BY values)."""
    if raw.empty:
        return empty_events()
    keys = plan.group_keys(tuple(raw[k].iat[0] for k in plan.keys))
    rows = plan.prepare(raw)
    watermark = None
    if not final and len(rows):
        watermark = int(rows["ts"].iat[-1]) - plan.spec.watermark
        rows = rows[rows["ts"] <= watermark].reset_index(drop=True)
    windows, _ = scan(plan.spec, rows, None, watermark=watermark, final=final)
    return event_rows(plan, keys, windows)


def _floor_div(value: Column, by: int) -> Column:
    """Exact floor division of bigints, negative values included (the dividend is made a multiple
    of ``by`` first, so the division is exact in a double)."""
    return ((value - F.pmod(value, F.lit(by))) / F.lit(by)).cast("bigint")


def _interval_counts(df: DataFrame, plan: TriggerPlan) -> DataFrame:
    spec = plan.spec
    t = F.unix_micros(F.col(plan.ts_column))
    last_k = _floor_div(t - F.lit(spec.offset), spec.sliding)
    first_k = _floor_div(t - F.lit(spec.offset + spec.interval), spec.sliding) + 1
    k = last_k if spec.interval == spec.sliding else F.explode(F.sequence(first_k, last_k))
    counts = (df.select(*plan.keys, t.alias("_t"), k.alias("_k"))
              .groupBy(*plan.keys, "_k").agg(F.count("*").alias("_n"), F.min("_t").alias("_first")))

    def fn(part):  # no type hints: Spark would read them as a UDF eval type
        if part.empty:
            return empty_events()
        keys = plan.group_keys(tuple(part[k].iat[0] for k in plan.keys))
        carry = {"lo": first_window(spec, int(part["_first"].min()))}
        windows, _ = interval_windows(spec, dict(zip(part["_k"].tolist(), part["_n"].tolist())), set(), carry,
                                      None, True)
        return event_rows(plan, keys, windows)[list(EVENT_COLUMNS)]

    grouped = counts.groupBy(*plan.keys) if plan.keys else counts.groupBy(F.lit(0).alias("_all"))
    return grouped.applyInPandas(fn, schema=EVENT_SCHEMA)
