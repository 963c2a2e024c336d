"""Detection throughput of the two detector engines on one trigger table (``bench/scale.py
--detection``): the in-process detector and the spark engine's table query on ``local[2]``, for 1
and ``--streams`` INTERVAL streams on one table of ``--meters`` meters.

The table gets ``--meters`` x ``--seconds`` rows (one per meter per second) in ``--commits``
commits; then each engine reads them all, from a new checkpoint, in one batch. Rows/s is the
table's rows over the seconds the engine took (the spark engine's query start included: a new
query per run), so 20 streams at 20 times the cost of one read as 1/20 of its rows/s.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
from deltalake import DeltaTable

from airflow_stream_provider import model as m
from airflow_stream_provider import statements
from airflow_stream_provider.spark.session import local_session
from airflow_stream_provider.sql import parse
from airflow_stream_provider.warehouse import Warehouse, writer
from airflow_stream_provider.windows import detector
from airflow_stream_provider.windows.changes import ChangeFeed
from airflow_stream_provider.windows.spark_detector import Member, SparkTableDetector
from airflow_stream_provider.windows.trigger_plan import plan_trigger

SCHEMA = """
CREATE DATABASE IF NOT EXISTS b PRECISION 'ms';
CREATE STABLE IF NOT EXISTS b.m (ts TIMESTAMP, v DOUBLE) TAGS (site VARCHAR(16));
"""


def _load(info, meters: int, seconds: int, commits: int) -> int:
    per = seconds // commits
    for c in range(commits):
        ts = np.arange(c * per, (c + 1) * per, dtype=np.int64) * 1_000_000
        table = pa.table({
            "ts": pa.array(np.tile(ts, meters)).cast(pa.timestamp("us", "UTC")),
            "v": pa.array(np.random.default_rng(c).uniform(0, 1, meters * per)),
            "tbname": pa.array(np.repeat([f"m{i}" for i in range(meters)], per)),
            "site": pa.array(np.repeat([f"s{i % 4}" for i in range(meters)], per)),
        })
        writer.upsert(info.path, table.cast(info.arrow_schema()), info.key_columns)
    return meters * per * commits


def detection_figures(meters: int, seconds: int, commits: int, streams: int) -> dict[str, dict[str, float]]:
    work = Path(tempfile.mkdtemp(prefix="bench-engines-"))
    spark = local_session("bench-engines", master="local[2]")
    wh = Warehouse(work / "warehouse", spark=spark)
    list(statements.run(wh, SCHEMA))
    info = wh.catalog.resolve(m.TableName("m", "b"), "b")
    created = DeltaTable(info.path).version()
    rows = _load(info, meters, seconds, commits)
    plans = []
    for i in range(streams):
        (stmt,) = parse(f"CREATE STREAM b.s{i} INTERVAL({10 + i}s) SLIDING({10 + i}s) FROM b.m PARTITION BY tbname "
                        f"INTO b.o{i} AS SELECT _twstart, count(*) FROM b.m")
        plans.append(plan_trigger(stmt, wh.catalog, "b"))
    out: dict[str, dict[str, float]] = {}
    for count in sorted({1, streams}):
        chosen = plans[:count]
        began = time.perf_counter()
        feed = ChangeFeed(info.path)
        for plan in chosen:
            options = detector.DetectorOptions(events_path=str(work / f"local-{count}" / plan.stream),
                                               checkpoint=str(work / f"lcp-{count}" / plan.stream),
                                               created_version=created)
            detector.Detector(plan, options, feed=feed).run_available()
        local_s = time.perf_counter() - began
        members = [Member(plan, str(work / f"spark-{count}" / plan.stream), created + 1) for plan in chosen]
        began = time.perf_counter()
        SparkTableDetector(spark, info.path, members, str(work / f"scp-{count}"), created + 1).run_available()
        spark_s = time.perf_counter() - began
        out[f"detection rows/s, {count} stream(s) on one table of {meters} meters"] = {
            "in-process": rows / local_s, "spark local[2]": rows / spark_s}
        pd.testing.assert_frame_equal(*(  # the two engines found the same windows
            DeltaTable(str(work / f"{kind}-{count}" / chosen[-1].stream)).to_pandas()[["trigger_id", "event_type"]]
            .sort_values(["trigger_id", "event_type"]).reset_index(drop=True) for kind in ("local", "spark")))
    spark.stop()
    return out


def print_table(figures: dict[str, dict[str, float]]) -> None:
    print("\nDetection: the in-process detector and the spark engine's table query on local[2]\n")
    print("| measure | in-process | spark local[2] | ratio |")
    print("|---|---:|---:|---:|")
    for key, pair in figures.items():
        a, b = pair["in-process"], pair["spark local[2]"]
        print(f"| {key} | {a:,.0f} | {b:,.0f} | {b / a:.3f} |")
