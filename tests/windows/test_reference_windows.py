"""The window-trigger examples of reference 000 ("Stream Creation Example"), each on rows made for
it, with the windows worked out by hand from the reference's words."""

from __future__ import annotations

import pandas as pd
import pytest

from airflow_stream_provider.sql import parse
from airflow_stream_provider.windows.batch import detect
from airflow_stream_provider.windows.trigger_plan import TriggerPlan

pytestmark = pytest.mark.spark

M = 60_000_000  # a minute in microseconds


def plan_of(sql: str, columns: list[str]) -> TriggerPlan:
    (stmt,) = parse(sql)
    return TriggerPlan.build(stmt, "example", path="unused", columns=columns, ts_column="ts")


def closes(spark, plan: TriggerPlan, rows: pd.DataFrame) -> list[tuple]:
    frame = rows.assign(ts=pd.to_datetime(rows["ts"], unit="us", utc=True))
    events = detect(spark.createDataFrame(frame), plan).toPandas()
    closed = events[events["event_type"] == "WINDOW_CLOSE"]
    return sorted((int(pd.Timestamp(s).value // 1000), int(pd.Timestamp(e).value // 1000), int(n))
                  for s, e, n in zip(closed["window_start"], closed["window_end"], closed["row_count"]))


def test_count_window_of_one_row_triggers_on_every_row(spark):
    """sm1: "Each time one row is written into table tb1 ..." - COUNT_WINDOW(1)."""
    plan = plan_of("CREATE stream sm1 count_window(1) FROM tb1 INTO tb3 AS "
                   "SELECT _twstart, avg(col1) FROM tb2 WHERE _c0 >= _twend - 5m AND _c0 <= _twend", ["ts", "col1"])
    rows = pd.DataFrame({"ts": [1 * M, 2 * M, 3 * M], "col1": [1.0, 2.0, 3.0]})
    assert closes(spark, plan, rows) == [(1 * M, 1 * M, 1), (2 * M, 2 * M, 1), (3 * M, 3 * M, 1)]


def test_count_window_of_ten_rows_where_col1_is_positive(spark):
    """sm2: "Each time 10 rows are written into table tb1 where column col1 is greater than 0" -
    COUNT_WINDOW(10, 1, col1) with PRE_FILTER(col1 > 0). Of 12 rows two are not positive, so the
    first window closes at the 10th positive row, and the next one (sliding 1) is still open."""
    plan = plan_of("CREATE stream sm2 count_window(10, 1, col1) FROM tb1 STREAM_OPTIONS(PRE_FILTER(col1 > 0)) "
                   "NOTIFY('ws://localhost:8080/notify') ON (WINDOW_CLOSE) AS SELECT avg(col1) FROM %%trows",
                   ["ts", "col1"])
    col1 = [5.0, 1.0, -2.0, 3.0, 4.0, 6.0, 0.0, 7.0, 8.0, 9.0, 10.0, 11.0]
    rows = pd.DataFrame({"ts": [(i + 1) * M for i in range(12)], "col1": col1})
    positive = [(i + 1) * M for i, v in enumerate(col1) if v > 0]
    assert closes(spark, plan, rows) == [(positive[0], positive[9], 10)]


def test_event_window_above_80_degrees_for_ten_minutes(spark):
    """ana_temp: "When the ambient temperature exceeds 80 and remains above that threshold for more
    than 10 minutes" - EVENT_WINDOW(start with temp > 80 end with temp <= 80) TRUE_FOR(10m). A
    spell from minute 1 to minute 12 (11 minutes) counts; one from 20 to 25 does not."""
    plan = plan_of("CREATE STREAM `idmp`.`ana_temp` EVENT_WINDOW(start with `temp` > 80 end with `temp` <= 80 ) "
                   "TRUE_FOR(10m) FROM `idmp`.`vt_envsens02_471544` STREAM_OPTIONS( IGNORE_DISORDER) "
                   "INTO `idmp`.`ana_temp` AS SELECT _twstart+0s as output_timestamp, avg(`temp`) as `avgtemp` "
                   "FROM idmp.`vt_engsens02_471544` where ts >= _twstart and ts <= _twend", ["ts", "temp"])
    temp = {0: 70, 1: 85, 5: 90, 11: 81, 12: 79, 20: 85, 25: 75, 30: 70}
    rows = pd.DataFrame({"ts": [t * M for t in temp], "temp": list(temp.values())})
    assert closes(spark, plan, rows) == [(1 * M, 12 * M, 4)]  # rows at minutes 1, 5, 11 and 12
    assert plan.ignore_disorder and not plan.recalculates


def test_five_minute_windows_per_subtable(spark):
    """sm1 (sliding trigger): "For each subtable of supertable stb1, at the end of every 5-minute
    time window" - INTERVAL(5m) SLIDING(5m) PARTITION BY tbname. A window closes once a later row
    shows its end has passed; the last window of each subtable stays open."""
    plan = plan_of("CREATE stream sm1 INTERVAL(5m) SLIDING(5m) FROM stb1 PARTITION BY tbname INTO stb2 AS "
                   "SELECT _twstart, avg(col1) FROM %%tbname WHERE _c0 >= _twstart AND _c0 <= _twend",
                   ["ts", "col1", "tbname"])
    rows = pd.DataFrame({"ts": [1 * M, 4 * M, 6 * M, 12 * M, 2 * M, 7 * M],
                         "col1": 1.0, "tbname": ["d1", "d1", "d1", "d1", "d2", "d2"]})
    assert closes(spark, plan, rows) == sorted([
        (0, 5 * M, 2), (5 * M, 10 * M, 1),  # d1; [10m, 15m) is open at 12m
        (0, 5 * M, 1),  # d2; [5m, 10m) is open at 7m
    ])


def test_max_delay_and_fill_history_first_reach_the_plan():
    """sm2: "... either when the window closes or when 1 minute has elapsed since the window opened
    ... starting from the earliest data" - MAX_DELAY(1m) | FILL_HISTORY_FIRST."""
    plan = plan_of("CREATE stream sm2 INTERVAL(5m) SLIDING(5m) FROM stb1 PARTITION BY tbname "
                   "STREAM_OPTIONS(MAX_DELAY(1m) | FILL_HISTORY_FIRST) INTO stb2 AS "
                   "SELECT _twstart, avg(col1) FROM %%tbname WHERE _c0 >= _twstart AND _c0 <= _twend",
                   ["ts", "col1", "tbname"])
    assert plan.max_delay == 1 * M
    assert plan.history and plan.since is None  # from the earliest record
