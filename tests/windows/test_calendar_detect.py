"""Calendar INTERVAL windows on Spark: the batch window finder, the live detector with late rows
(recalculated to the batch result), and an ad-hoc ``SELECT ... INTERVAL(1n)``.

The rows: d1 has one row a day at 12:00 UTC from 2024-01-15 to 2024-04-14, so its months of
Europe/Berlin hold 17 (January 15..31), 29 (February, a leap year), 31 (March) and 14 rows
(April 1..14); d2 one row a day in March 2024. Berlin's months begin at 23:00 UTC the day before
in winter (CET, +1) and 22:00 in summer (CEST, +2, from March 31st).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from airflow_stream_provider.sql import parse
from airflow_stream_provider.windows import select as window_select
from airflow_stream_provider.windows.batch import detect
from tests.windows.test_detector import setup, write
from tests.windows.test_recalc import closes, fold, run, utc

pytestmark = pytest.mark.spark

DAY = 86_400_000_000


def days(first: str, count: int) -> np.ndarray:
    start = pd.Timestamp(first, tz="UTC").value // 1000
    return start + np.arange(count, dtype=np.int64) * DAY


def rows() -> pd.DataFrame:
    d1, d2 = days("2024-01-15 12:00", 91), days("2024-03-01 12:00", 31)
    return pd.DataFrame({
        "ts": np.concatenate([d1, d2]), "current": np.float32(1.0), "voltage": np.int32(220),
        "tbname": ["d1"] * len(d1) + ["d2"] * len(d2), "location": "SF",
    })


def test_month_windows_of_a_zone_in_batch_live_and_query(spark, tmp_path):
    wh, info, plan, opts = setup(spark, tmp_path, "cal", "INTERVAL(1n) SLIDING(1n)", "TIMEZONE 'Europe/Berlin'")
    assert plan.spec.grid is not None and plan.spec.grid.zone == "Europe/Berlin"
    data = rows()
    rng = np.random.default_rng(5)
    order = data.iloc[rng.permutation(len(data))].reset_index(drop=True)
    for part in np.array_split(np.arange(len(order)), 3):  # rows late and out of order, three commits
        write(info, order.iloc[part])
    table = spark.read.format("delta").load(plan.path)
    final = detect(table, plan, final=True).toPandas()
    closed = final[final["event_type"] == "WINDOW_CLOSE"]
    by_group = sorted((utc(s), utc(e), int(n)) for s, e, n in zip(
        closed["window_start"], closed["window_end"], closed["row_count"], strict=True))
    jan, feb, mar = utc("2023-12-31 23:00"), utc("2024-01-31 23:00"), utc("2024-02-29 23:00")
    apr, may = utc("2024-03-31 22:00"), utc("2024-04-30 22:00")
    assert by_group == [(jan, feb, 17), (feb, mar, 29), (mar, apr, 31), (mar, apr, 31), (apr, may, 14)]
    # live: the same windows as batch mode sees them before the data ends (April stays open),
    # whatever order the rows came in: late rows recalculate the months they fall in
    streamed = run(spark, plan, opts)
    batch = closes(detect(table, plan).toPandas())
    assert sorted(batch.values()) == [(jan, feb, 17), (feb, mar, 29), (mar, apr, 31)]
    assert fold(streamed) == batch
    # an ad-hoc query counts months of the home's zone (UTC here): March 1st 12:00 is March in both
    (stmt,) = parse("SELECT _wstart, _wend, count(*) FROM power.cal WHERE tbname = 'd1' INTERVAL(1n)")
    got = window_select.table(wh, stmt.query).to_pandas()
    assert [str(pd.Timestamp(v).date()) for v in got["_wstart"]] == ["2024-01-01", "2024-02-01", "2024-03-01",
                                                                     "2024-04-01"]
    assert got["count(*)"].tolist() == [17, 29, 31, 14]
    assert (pd.Timestamp(got["_wend"].iloc[1]) - pd.Timestamp(got["_wstart"].iloc[1])).days == 29
    # FILL covers the empty months between the rows: February and March left out, filled with 0
    (stmt,) = parse("SELECT _wstart, count(*) FROM power.cal WHERE tbname = 'd1' AND (ts < '2024-02-01' OR "
                    "ts >= '2024-04-01') INTERVAL(1n) FILL(VALUE, 0)")
    got = window_select.table(wh, stmt.query).to_pandas()
    assert [str(pd.Timestamp(v).date()) for v in got["_wstart"]] == ["2024-01-01", "2024-02-01", "2024-03-01",
                                                                     "2024-04-01"]
    assert got["count(*)"].tolist() == [17, 0, 0, 14]
