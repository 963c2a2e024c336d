"""The node's host runs the spark detector engine: a stream naming ENGINE('spark') is detected by
its table's Structured Streaming query on the host's Spark session (local[2] here), its events and
results equal to its in-process twin's on the same rows; and a stream moved from the in-process
engine to the spark engine and back (the node's engine setting changed) keeps its open windows,
writing each window and event once."""

from __future__ import annotations

import time

import pandas as pd
import pytest
from deltalake import DeltaTable

from airflow_stream_provider import statements
from airflow_stream_provider.node.host import DetectorHost
from airflow_stream_provider.streams.run import run as run_stream
from airflow_stream_provider.streams.status import engine_of
from airflow_stream_provider.streams.store import StreamStore
from airflow_stream_provider.warehouse import Warehouse

pytestmark = pytest.mark.spark

STREAM = ("CREATE STREAM {name} INTERVAL(10s) SLIDING(10s) FROM m {options} INTO {name}_out "
          "AS SELECT _twstart ts, count(*) n, sum(v) total FROM %%trows")
COMPARED = ["trigger_id", "event_type", "window_start", "window_end", "row_count", "group_id"]


def insert(wh: Warehouse, *rows: tuple[int, int]) -> None:
    values = " ".join(f"('2025-01-01 00:00:{s:02d}', {v})" for s, v in rows)
    list(statements.run(wh, f"INSERT INTO m VALUES {values}"))


def events(wh: Warehouse, name: str) -> list[tuple]:
    try:
        frame = DeltaTable(str(StreamStore().get("e", name).events_path)).to_pandas()
    except Exception:
        return []
    return sorted(tuple(str(v) for v in row) for row in frame[COMPARED].itertuples(index=False))


def same_but_ids(got: list[tuple], want: list[tuple]) -> bool:
    return sorted(row[1:] for row in got) == sorted(row[1:] for row in want)


def closes(wh: Warehouse, name: str) -> int:
    return sum(1 for row in events(wh, name) if row[1] == "WINDOW_CLOSE")


def wait_for_closes(host: DetectorHost, wh: Warehouse, wanted: dict[str, int], timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        host.reconcile()
        if all(closes(wh, name) >= n for name, n in wanted.items()):
            return
        time.sleep(0.5)
    raise AssertionError({name: events(wh, name) for name in wanted})


def results(wh: Warehouse, name: str) -> list[tuple]:
    run_stream(wh, "e", name)
    table = list(statements.run(wh, f"SELECT ts, n, total FROM {name}_out ORDER BY ts"))[-1].table
    return [(pd.Timestamp(r["ts"]).strftime("%H:%M:%S"), r["n"], r["total"]) for r in table.to_pylist()]


@pytest.fixture
def home(spark, tmp_path, monkeypatch):
    monkeypatch.setenv("AIRFLOW_STREAM_HOME", str(tmp_path))
    monkeypatch.setenv("AIRFLOW_STREAM_API_URL", "http://127.0.0.1:9")  # no Airflow here
    monkeypatch.setenv("AIRFLOW_STREAM_DETECTOR_ENGINE", "in-process")
    wh = Warehouse(tmp_path / "warehouse", spark=spark)
    list(statements.run(wh, "CREATE DATABASE e; USE e; CREATE TABLE m (ts TIMESTAMP, v INT)"))
    host = DetectorHost(spark, master="local[2]")
    yield wh, host
    host.stop_all()


def test_a_spark_engine_stream_writes_what_its_in_process_twin_writes(home):
    wh, host = home
    list(statements.run(wh, STREAM.format(name="ip", options="STREAM_OPTIONS(ENGINE('in-process'))") + "; "
                        + STREAM.format(name="sp", options="STREAM_OPTIONS(ENGINE('spark'))")))
    stores = StreamStore()
    assert [engine_of(stores.get("e", n).statement) for n in ("ip", "sp")] == ["in-process", "spark"]
    host.reconcile()
    assert host.hosted["e.sp"].engine == "spark" and host.hosted["e.ip"].engine == "in-process"
    insert(wh, (1, 1), (2, 2), (3, 3))
    insert(wh, (12, 10), (15, 20))
    insert(wh, (25, 5))
    # by hand: [0s, 10s) holds 1, 2, 3 (three rows, 6); [10s, 20s) holds 10 and 20; the row at 25 s
    # closes both and leaves [20s, 30s) open
    wait_for_closes(host, wh, {"ip": 2, "sp": 2})
    # (a trigger id is made from its stream's name: the twins' differ)
    assert same_but_ids(events(wh, "sp"), events(wh, "ip"))
    want = [("00:00:00", 3, 6), ("00:00:10", 2, 30)]
    assert results(wh, "ip") == want
    assert results(wh, "sp") == want
    # the stream DAG's sensor reads the stream's own checkpoint, which the table's query commits
    from airflow_stream_provider.streams.probes import last_commit

    assert last_commit(stores.get("e", "sp").checkpoint) is not None
    # a second stream on the table restarts its query: the first loses and repeats nothing
    list(statements.run(wh, STREAM.format(name="sp2", options="STREAM_OPTIONS(ENGINE('spark'))")))
    host.reconcile()
    insert(wh, (31, 7))
    wait_for_closes(host, wh, {"ip": 3, "sp": 3})
    assert same_but_ids(events(wh, "sp"), events(wh, "ip"))
    assert results(wh, "sp") == [*want, ("00:00:20", 1, 5)]


def test_a_stream_moved_to_the_spark_engine_and_back_keeps_its_open_windows(home, monkeypatch):
    wh, host = home
    list(statements.run(wh, STREAM.format(name="mv", options="")))
    host.reconcile()
    assert host.hosted["e.mv"].engine == "in-process"
    insert(wh, (1, 1), (2, 2), (3, 3))
    insert(wh, (12, 10))  # closes [0s, 10s) on the in-process engine; [10s, 20s) is open with one row
    wait_for_closes(host, wh, {"mv": 1})
    monkeypatch.setenv("AIRFLOW_STREAM_DETECTOR_ENGINE", "spark")
    host.reconcile()  # the engine changed: the stream leaves its in-process detector for the table's query
    assert host.hosted["e.mv"].engine == "spark"
    insert(wh, (15, 20))
    insert(wh, (25, 5))
    wait_for_closes(host, wh, {"mv": 2})
    time.sleep(1.0)
    found = events(wh, "mv")
    assert len({row[0] for row in found if row[1] == "WINDOW_CLOSE"}) == 2  # two windows, each closed once
    # the close of the window open across the move counts its row read before it (the state carried)
    assert sorted(row[4] for row in found if row[1] == "WINDOW_CLOSE") == ["2", "3"]
    assert [row[1:4] for row in found if row[1] == "WINDOW_CLOSE"] == [
        ("WINDOW_CLOSE", "2025-01-01 00:00:00+00:00", "2025-01-01 00:00:10+00:00"),
        ("WINDOW_CLOSE", "2025-01-01 00:00:10+00:00", "2025-01-01 00:00:20+00:00")]
    # the window open across the move counts the row read before it and the one after
    assert results(wh, "mv") == [("00:00:00", 3, 6), ("00:00:10", 2, 30)]
    # and back: the in-process detector goes on from the checkpoint the query kept ([20s, 30s) open
    # with the row at 25 s, which the row at 33 s closes)
    monkeypatch.setenv("AIRFLOW_STREAM_DETECTOR_ENGINE", "in-process")
    host.reconcile()
    assert host.hosted["e.mv"].engine == "in-process"
    insert(wh, (33, 4))
    wait_for_closes(host, wh, {"mv": 3})
    time.sleep(1.0)
    found = events(wh, "mv")
    assert len({row[0] for row in found if row[1] == "WINDOW_CLOSE"}) == sum(row[1] == "WINDOW_CLOSE" for row in found)
    assert results(wh, "mv") == [("00:00:00", 3, 6), ("00:00:10", 2, 30), ("00:00:20", 1, 5)]
