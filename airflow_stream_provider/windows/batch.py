"""Batch mode: the window core over a whole Spark DataFrame, all groups in one Spark job.

Used for history (FILL_HISTORY), recalculation and checks. Each group's rows go to one Python
call that scans them in time order, exactly as the streaming detector would have, and returns the
group's events.

INTERVAL windows of fixed lengths over finished data (``final``, no PRE_FILTER) take a shorter road: Spark counts
the rows of every pane natively and only the counts go to Python, where they are added up into
windows and the same core code (:func:`.core.interval_windows`) turns them into windows, one
Python call per partition for all of its groups.

Nested windows (TDengine 3.4.2) scan each group's rows layer by layer (:mod:`.nested`).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from airflow_stream_provider.model.events import TriggerKind
from airflow_stream_provider.spark.session import setting
from airflow_stream_provider.windows import rollup
from airflow_stream_provider.windows.columns import concat_windows
from airflow_stream_provider.windows.core import first_window, interval_windows, scan
from airflow_stream_provider.windows.events import (
    EVENT_COLUMNS,
    EVENT_SCHEMA,
    empty_events,
    event_rows,
    groups_event_rows,
)
from airflow_stream_provider.windows.nested import scan_nested
from airflow_stream_provider.windows.spec import WindowSpec
from airflow_stream_provider.windows.trigger_plan import TriggerPlan


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
    if final and plan.spec.kind is TriggerKind.INTERVAL and plan.pre_filter is None and plan.spec.grid is None \
            and not plan.nested:
        return _interval_counts(df, plan)
    if plan.rollup:  # once per rollup group, as the live detector reads them
        df = rollup.spark_expand(df, plan.keys[0])
    return scan_groups(df, plan, final=final)


def scan_groups(df: DataFrame, plan: TriggerPlan, *, final: bool = False) -> DataFrame:
    """Batch mode row by row: every group's rows through the window core (any trigger type)."""

    def fn(raw):  # no type hints: Spark would read them as a UDF eval type
        return group_events(plan, raw, final=final)[list(EVENT_COLUMNS)]

    grouped = df.groupBy(*plan.keys) if plan.keys else df.groupBy(F.lit(0).alias("_all"))
    return grouped.applyInPandas(fn, schema=EVENT_SCHEMA)


def group_events(plan: TriggerPlan, raw: pd.DataFrame, *, final: bool = False,
                 key: tuple | None = None) -> pd.DataFrame:
    """The events of one group's raw rows (all rows share the PARTITION BY values, ``key`` when
    given: else they are read from the first row)."""
    if raw.empty:
        return empty_events()
    keys = plan.group_keys(key if key is not None else tuple(raw[k].iat[0] for k in plan.keys))
    rows = plan.prepare(raw)
    watermark = latest = None
    if not final and len(rows):
        latest = int(rows["ts"].iat[-1])
        watermark = latest - plan.spec.watermark
        rows = rows[rows["ts"] <= watermark].reset_index(drop=True)
    if plan.nested:
        windows = scan_nested([layer.spec for layer in plan.outer], plan.spec, rows, final=final, flush=plan.flush,
                              watermark=latest)
    else:
        windows, _ = scan(plan.spec, rows, None, watermark=watermark, final=final)
    return event_rows(plan, keys, windows)


def _floor_div(value: Column, by: int) -> Column:
    """Exact floor division of bigints, negative values included (the dividend is made a multiple
    of ``by`` first, so the division is exact in a double)."""
    return ((value - F.pmod(value, F.lit(by))) / F.lit(by)).cast("bigint")


def _window_counts(spec: WindowSpec, pane: int, panes: np.ndarray, counts: np.ndarray) -> dict[int, int]:
    """Rows per INTERVAL window index from rows per pane (panes of ``pane`` microseconds from the
    offset, ``pane`` dividing both the interval and the sliding step): window k holds the panes
    from k*sliding up to k*sliding + interval."""
    size, step = spec.interval, spec.sliding
    hi = panes * pane // step  # the last window holding the pane
    lo = (panes * pane - size) // step + 1  # the first
    ks = hi[:, None] - np.arange(-(-size // step))[None, :]
    inside = ks >= lo[:, None]
    k, at = np.unique(ks[inside], return_inverse=True)
    n = np.bincount(at, weights=np.broadcast_to(counts[:, None], ks.shape)[inside]).astype(np.int64)
    return dict(zip(k.tolist(), n.tolist(), strict=True))


def _interval_counts(df: DataFrame, plan: TriggerPlan) -> DataFrame:
    spec = plan.spec
    # Spark counts rows per pane, the largest span that divides both the interval and the step
    # (the window itself when they are equal), so a row is counted once however many sliding
    # windows hold it; the core's side adds panes up into windows
    pane = math.gcd(spec.interval, spec.sliding)
    t = F.unix_micros(F.col(plan.ts_column))
    counts = (df.select(*plan.keys, t.alias("_t"), _floor_div(t - F.lit(spec.offset), pane).alias("_p"))
              .groupBy(*plan.keys, "_p").agg(F.count("*").alias("_n"), F.min("_t").alias("_first")))
    if plan.rollup:  # ROLLUP BY: each path's pane counts added up in each of its rollup groups
        counts = (rollup.spark_expand(counts, plan.keys[0]).groupBy(*plan.keys, "_p")
                  .agg(F.sum("_n").alias("_n"), F.min("_first").alias("_first")))

    def fn(batches):  # no type hints: Spark would read them as a UDF eval type
        # every row of a group is in this partition: they were partitioned by the group keys
        frames = [b for b in batches if len(b)]
        if not frames:
            return
        part = pd.concat(frames, ignore_index=True)
        keys, windows = [], []
        by = list(plan.keys) or [pd.Series(0, index=part.index)]
        for _, rows in part.groupby(by, sort=False, dropna=False):
            carry = {"lo": first_window(spec, int(rows["_first"].min()))}
            per_window = _window_counts(spec, pane, rows["_p"].to_numpy(np.int64), rows["_n"].to_numpy(np.int64))
            found, _ = interval_windows(spec, per_window, set(), carry, None, True)
            keys.append(plan.group_keys(tuple(rows[k].iat[0] for k in plan.keys)))
            windows.append(found)
        group = np.repeat(np.arange(len(windows)), [len(w) for w in windows])
        yield groups_event_rows(plan, keys, concat_windows(windows), group)[list(EVENT_COLUMNS)]

    # one Python call per partition, not per group; the explicit partition count keeps adaptive
    # execution from folding the (small) counts into a single partition, and so a single core
    partitions = int(setting(df.sparkSession, "spark.sql.shuffle.partitions")) if plan.keys else 1
    return counts.repartition(partitions, *plan.keys).mapInPandas(fn, schema=EVENT_SCHEMA)
