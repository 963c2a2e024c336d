"""Batch mode: the window core over a whole Spark DataFrame, all groups in one Spark job.

Used for history (FILL_HISTORY), recalculation and checks. Each group's rows go to one Python
call that scans them in time order, exactly as the streaming detector would have, and returns the
group's events.
"""

from __future__ import annotations

import pandas as pd
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from airflow_stream_provider.windows.core import scan
from airflow_stream_provider.windows.events import EVENT_COLUMNS, EVENT_SCHEMA, empty_events, event_rows
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

    def fn(raw):  # noqa: ANN001, ANN202 - no hints: Spark would read them as an eval type
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
