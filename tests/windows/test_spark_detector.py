"""The ``spark`` detector engine against the in-process detector: on the same table versions, read
in the same batches, with rows out of order, late rows, updates and deletes, the Structured
Streaming query finds the same events with the same trigger ids, for every trigger type it runs;
a batch replayed after a crash is written once; and the engine refuses what it does not run."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from deltalake import DeltaTable

from airflow_stream_provider import model as m
from airflow_stream_provider import statements
from airflow_stream_provider.sql import parse
from airflow_stream_provider.streams.probes import last_commit
from airflow_stream_provider.warehouse import Warehouse, writer
from airflow_stream_provider.windows import detector
from airflow_stream_provider.windows.changes import ChangeFeed
from airflow_stream_provider.windows.spark_detector import Member, SparkTableDetector, spark_refusal
from airflow_stream_provider.windows.trigger_plan import plan_trigger

pytestmark = pytest.mark.spark

S = 1_000_000
ROCKSDB = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
SCHEMA = """
CREATE DATABASE IF NOT EXISTS power PRECISION 'ms';
CREATE STABLE IF NOT EXISTS power.m (ts TIMESTAMP, current FLOAT, voltage INT) TAGS (location VARCHAR(16));
"""
OPTIONS = "STREAM_OPTIONS(WATERMARK(3s)|DELETE_RECALC|EVENT_TYPE(WINDOW_OPEN|WINDOW_CLOSE))"
#: one stream per trigger type, all on one table (the engine runs one query for them all)
STREAMS = {
    "interval": f"INTERVAL(10s) SLIDING(10s) FROM power.m PARTITION BY tbname {OPTIONS}",
    "sliding": f"INTERVAL(20s) SLIDING(10s) FROM power.m PARTITION BY location {OPTIONS}",
    "session": f"SESSION(ts, 2s) FROM power.m PARTITION BY tbname {OPTIONS}",
    "state": f"STATE_WINDOW(voltage) TRUE_FOR(COUNT 2) FROM power.m PARTITION BY tbname {OPTIONS}",
    "event": f"EVENT_WINDOW(START WITH current > 12 END WITH current < 6) FROM power.m PARTITION BY tbname {OPTIONS}",
    "count": "COUNT_WINDOW(4, 2) FROM power.m PARTITION BY tbname",
    "subevent": f"EVENT_WINDOW(START WITH (current > 15, current > 8)) FROM power.m PARTITION BY tbname {OPTIONS}",
    "ignore": "INTERVAL(10s) SLIDING(5s) FROM power.m STREAM_OPTIONS(IGNORE_DISORDER)",
    # calendar windows: months of Kolkata (January 1970 from 1969-12-31 18:30 UTC), the same grid in Spark
    "calendar": f"INTERVAL(1n) SLIDING(1n) FROM power.m PARTITION BY tbname TIMEZONE 'Asia/Kolkata' {OPTIONS}",
}
COMPARED = ["stream", "trigger_id", "event_type", "trigger_type", "group_id", "group_keys", "window_start",
            "window_end", "row_count", "window_ordinal", "prev_state", "cur_state", "next_state",
            "condition_index", "field_values", "batch_id"]


def rows(ts_seconds, current, voltage, tbname) -> pa.Table:
    n = len(ts_seconds)
    return pa.table({
        "ts": pa.array(pd.to_datetime(np.asarray(ts_seconds, np.int64) * S, unit="us", utc=True)).cast(
            pa.timestamp("us", "UTC")),
        "current": pa.array(current, pa.float32()), "voltage": pa.array(voltage, pa.int32()),
        "tbname": pa.array([tbname] * n, pa.string()), "location": pa.array(["SF" if tbname == "d1" else "LA"] * n),
    })


def commits(rng) -> list[tuple[str, object]]:
    """The table's history: writes in arrival order, rows out of order within the watermark, late
    rows behind it, an update of a row already scanned and a delete."""
    out: list[tuple[str, object]] = []
    t = {"d1": 0, "d2": 0}
    for step in range(5):
        for name in ("d1", "d2"):
            ts = t[name] + np.cumsum(rng.integers(1, 4, 8))
            t[name] = int(ts[-1])
            order = np.argsort(ts + rng.uniform(0, 2.5, len(ts)))  # within the 3 s watermark
            out.append(("upsert", rows(ts[order], rng.uniform(0, 20, 8).round(1), rng.integers(219, 222, 8), name)))
        if step == 2:
            out.append(("upsert", rows([5, 7], [15.0, 1.0], [300, 300], "d1")))  # late rows
            out.append(("upsert", rows([3], [2.0], [219], "d2")))  # an update (or a late row) behind the watermark
        if step == 3:
            out.append(("delete", "tbname = 'd1' AND ts <= '1970-01-01T00:00:12Z'"))
    return out


@pytest.fixture(scope="module")
def table(spark, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("spark-detector")
    wh = Warehouse(tmp / "warehouse", spark=spark)
    list(statements.run(wh, SCHEMA))
    info = wh.catalog.resolve(m.TableName("m", "power"), "power")
    plans = {}
    for name, clauses in STREAMS.items():
        (stmt,) = parse(f"CREATE STREAM power.s_{name} {clauses} INTO power.out_{name} "
                        "AS SELECT _twstart, count(*) FROM power.m")
        plans[name] = plan_trigger(stmt, wh.catalog, "power")
    return tmp, info, plans, DeltaTable(info.path).version()


def test_spark_events_equal_in_process_events(spark, table):
    tmp, info, plans, created = table
    feed = ChangeFeed(info.path)
    local = {name: detector.Detector(plan, detector.DetectorOptions(
        events_path=str(tmp / "local" / name), checkpoint=str(tmp / "local-cp" / name), created_version=created),
        feed=feed) for name, plan in plans.items()}
    members = [Member(plan, str(tmp / "spark" / name), created + 1) for name, plan in plans.items()]
    query = SparkTableDetector(spark, info.path, members, str(tmp / "spark-cp"), created + 1)
    for kind, what in commits(np.random.default_rng(7)):
        apply(info, kind, what)
        for found in local.values():
            found.run_available()
        query.run_available()  # a new start from the checkpoint each time: every batch a restart
    assert last_commit(tmp / "spark-cp") is not None  # the commits the stream DAG's sensor watches
    # the groups' state in the RocksDB state store, for this query only
    assert ROCKSDB in (tmp / "spark-cp" / "offsets" / "0").read_text()
    assert spark.conf.get("spark.sql.streaming.stateStore.providerClass", None) != ROCKSDB
    seen = set()
    for name in plans:
        expected = events(tmp / "local" / name)
        got = events(tmp / "spark" / name)
        seen |= set(expected["event_type"])
        assert len(expected), name
        # batches are numbered per stream in process and per table on Spark: compared by their order
        for frame in (expected, got):
            frame["batch_id"] = frame["batch_id"].rank(method="dense").astype(int)
        pd.testing.assert_frame_equal(got, expected, obj=name)
    assert {"WINDOW_OPEN", "WINDOW_CLOSE", "WINDOW_INVALIDATION"} <= seen


def apply(info, kind: str, what) -> None:
    if kind == "upsert":
        writer.upsert(info.path, what.cast(info.arrow_schema()), info.key_columns)
    else:
        writer.delete_rows(info.path, what)


def events(path) -> pd.DataFrame:
    try:
        frame = DeltaTable(str(path)).to_pandas()
    except Exception:
        return pd.DataFrame(columns=COMPARED)
    frame = frame[COMPARED].astype(str)
    return frame.sort_values(COMPARED[:-1] + ["batch_id"]).reset_index(drop=True)


class Crashing(SparkTableDetector):
    """The driver dies after writing a batch's events and before Spark commits the batch."""

    def _write(self, events, batch_id):
        super()._write(events, batch_id)
        raise RuntimeError("the driver died here")


def test_a_batch_replayed_after_a_crash_is_written_once(spark, table):
    tmp, info, plans, created = table
    if DeltaTable(info.path).version() == created:  # (run alone: the history the first test writes)
        for kind, what in commits(np.random.default_rng(7)):
            apply(info, kind, what)
    chosen = {name: plans[name] for name in ("interval", "state")}
    members = [Member(plan, str(tmp / "crash" / name), created + 1) for name, plan in chosen.items()]
    checkpoint = str(tmp / "crash-cp")
    with pytest.raises(Exception, match="the driver died here"):
        Crashing(spark, info.path, members, checkpoint, created + 1).run_available()
    assert last_commit(checkpoint) is None  # the batch ran, wrote its events, and was never committed
    SparkTableDetector(spark, info.path, members, checkpoint, created + 1).run_available()
    assert last_commit(checkpoint)[0] == 0  # the same batch again, now committed
    for name, plan in chosen.items():
        once = detector.Detector(plan, detector.DetectorOptions(
            events_path=str(tmp / "once" / name), checkpoint=str(tmp / "once-cp" / name), created_version=created))
        assert once.run_available() == 1
        assert DeltaTable(str(tmp / "crash" / name)).version() == 0  # one commit: the replay wrote nothing
        pd.testing.assert_frame_equal(events(tmp / "crash" / name), events(tmp / "once" / name), obj=name)


def test_the_engine_refuses_what_it_does_not_run(spark, table):
    tmp, info, plans, _ = table
    for clauses, refused in (("MAX_DELAY(5s)", "MAX_DELAY"), ("FILL_HISTORY", "FILL_HISTORY")):
        (stmt,) = parse(f"CREATE STREAM power.r INTERVAL(10s) SLIDING(10s) FROM power.m STREAM_OPTIONS({clauses}) "
                        "INTO power.out_r AS SELECT _twstart, count(*) FROM power.m")
        plan = plan_trigger(stmt, Warehouse(tmp / "warehouse", spark=spark).catalog, "power")
        assert spark_refusal(plan) == refused
        with pytest.raises(ValueError, match=f"the spark detector engine does not run {refused}"):
            SparkTableDetector(spark, info.path, [Member(plan, str(tmp / "r"))], str(tmp / "r-cp"), 0)
    assert {spark_refusal(plan) for plan in plans.values()} == {None}
