"""A recalculation's windows found in the process equal those Spark's batch mode finds.

A range whose rows are few is read by delta-rs and scanned group by group in the process
(:func:`~airflow_stream_provider.streams.fire.windows.windows_in_range_locally`); a larger one goes
to Spark (:func:`~airflow_stream_provider.streams.fire.windows.windows_in_range`). Spark's result is
the oracle: every window kind, over groups of subtables and of an integer column with NULLs, gives
the same events (trigger ids included: the live detector's) and the same fired windows both ways.
"""

from __future__ import annotations

from datetime import UTC, datetime

import numpy as np
import pytest
from pyspark.sql import functions as F

from airflow_stream_provider.streams import duckdb
from airflow_stream_provider.streams.fire.windows import windows_in_range, windows_in_range_locally
from airflow_stream_provider.streams.runtime import StreamRuntime
from airflow_stream_provider.streams.store import StreamStore
from tests.conftest import sql

pytestmark = pytest.mark.spark

START, END = datetime(2025, 1, 1, 0, 0, 20, tzinfo=UTC), datetime(2025, 1, 1, 0, 1, 10, tzinfo=UTC)
KINDS = [
    ("i", "INTERVAL(20s) SLIDING(10s)", "tbname"),
    ("s", "SESSION(ts, 7s)", "tbname"),
    ("st", "STATE_WINDOW(st)", "tbname"),
    ("e", "EVENT_WINDOW(START WITH v >= 6 END WITH v <= 2)", "tbname"),
    ("c", "COUNT_WINDOW(4, 2)", "tbname"),
    ("k", "INTERVAL(15s) SLIDING(15s)", "st"),  # an integer group key, NULL in some rows
]


@pytest.fixture
def wh(wh):
    rng = np.random.default_rng(11)
    sql(wh, "CREATE DATABASE lr PRECISION 'ms'; USE lr; "
            "CREATE STABLE meters (ts TIMESTAMP, v INT, st INT) TAGS (site INT); "
            "CREATE TABLE d0 USING meters TAGS (0); CREATE TABLE d1 USING meters TAGS (1)")
    values = []
    for second in range(0, 100, 3):
        for meter in range(2):
            if rng.random() < 0.2:
                continue  # gaps: sessions end, windows stay empty
            st = "NULL" if rng.random() < 0.15 else str(int(rng.integers(1, 3)))
            values.append(f"d{meter} VALUES ('2025-01-01 00:{second // 60:02d}:{second % 60:02d}', "
                          f"{int(rng.integers(0, 10))}, {st})")
    sql(wh, "INSERT INTO " + " ".join(values))
    return wh


def _fired(found):
    fired, events = found
    # (event_time and _tlocaltime are when the window was found)
    rows = sorted(({k: v for k, v in e.fields().items() if k != "event_time"} for e in events),
                  key=lambda r: (r["window_start"], r["group_id"], r["event_type"]))
    return ([(f.trigger_id, f.group_id, f.group, f.version, sorted((k, v) for k, v in f.values.items()
                                                                    if k != "_tlocaltime")) for f in fired], rows)


@pytest.mark.parametrize(("name", "trigger", "key"), KINDS)
def test_windows_of_a_range_found_locally_equal_spark(wh, name, trigger, key):
    sql(wh, f"CREATE STREAM lr.{name} {trigger} FROM lr.meters PARTITION BY {key} "
            f"INTO lr.out_{name} AS SELECT _twstart ts, count(*) n, sum(v) s FROM %%trows")
    stored = StreamStore().get("lr", name)
    runtime = StreamRuntime(wh, stored.statement, "lr", text=stored.text)
    version = runtime.table_version()
    said = []
    mine = windows_in_range_locally(runtime, START, END, version, said.append)
    assert mine is not None and "in the process" in said[-1]
    rows = wh.spark.read.format("delta").load(str(runtime.info.path)).where(F.col("ts") >= F.lit(START))
    theirs = windows_in_range(runtime, rows, START, END, version, said.append)
    assert theirs[0], "the range has windows"
    mine, theirs = _fired(mine), _fired(theirs)
    assert mine[0] == theirs[0]
    assert len(mine[1]) == len(theirs[1])
    for a, b in zip(mine[1], theirs[1], strict=True):
        assert a == b


def test_a_range_of_many_rows_goes_to_spark(wh, monkeypatch):
    sql(wh, "CREATE STREAM lr.many INTERVAL(20s) SLIDING(20s) FROM lr.meters PARTITION BY tbname "
            "INTO lr.out_many AS SELECT _twstart ts, count(*) n FROM %%trows")
    stored = StreamStore().get("lr", "many")
    runtime = StreamRuntime(wh, stored.statement, "lr", text=stored.text)
    monkeypatch.setattr(duckdb, "LOCAL_ROWS", 10)
    assert windows_in_range_locally(runtime, START, END, runtime.table_version(), lambda _m: None) is None
