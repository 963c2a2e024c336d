"""The streaming detector on real Delta change feeds: the same windows as batch mode, however the
rows are split into commits and micro-batches, exactly once across restarts and kills."""

from __future__ import annotations

import dataclasses
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from deltalake import DeltaTable
from deltalake.exceptions import TableNotFoundError
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from airflow_stream_provider import model as m
from airflow_stream_provider import statements
from airflow_stream_provider.notify.message import window_fields
from airflow_stream_provider.sql import parse
from airflow_stream_provider.warehouse import Warehouse, writer
from airflow_stream_provider.windows import detector
from airflow_stream_provider.windows.batch import detect
from airflow_stream_provider.windows.events import EVENT_COLUMNS, EVENT_STATS_COLUMNS, write_events
from airflow_stream_provider.windows.trigger_plan import plan_trigger
from airflow_stream_provider.windows.turns import Turns, elsewhere, step_back

pytestmark = pytest.mark.spark

S = 1_000_000
SCHEMA = """
CREATE DATABASE IF NOT EXISTS power PRECISION 'ms';
CREATE STABLE IF NOT EXISTS power.{table} (ts TIMESTAMP, current FLOAT, voltage INT) TAGS (location VARCHAR(16));
"""
TRIGGERS = {
    "interval": "INTERVAL(20s) SLIDING(10s)",
    "session": "SESSION(ts, 8s)",
    "state": "STATE_WINDOW(voltage) TRUE_FOR(COUNT 2)",
    "event": "EVENT_WINDOW(START WITH current > 12 END WITH current < 6)",
    "count": "COUNT_WINDOW(4, 2)",
}


def make_rows(seed: int, n: int = 120) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    frames = []
    for name, loc in (("d1", "SF"), ("d2", "LA")):
        ts = np.cumsum(rng.integers(1, 6, size=n)) * 1000 * 1000  # whole milliseconds, as the database keeps
        frames.append(pd.DataFrame({
            "ts": ts, "current": rng.uniform(0, 20, n).round(1).astype("float32"),
            "voltage": rng.integers(219, 222, n).astype("int32"), "tbname": name, "location": loc,
        }))
    return pd.concat(frames, ignore_index=True)


def write(info, rows: pd.DataFrame) -> None:
    table = pa.table({
        "ts": pa.array(pd.to_datetime(rows["ts"], unit="us", utc=True)).cast(pa.timestamp("us", "UTC")),
        "current": pa.array(rows["current"], pa.float32()),
        "voltage": pa.array(rows["voltage"], pa.int32()),
        "tbname": pa.array(rows["tbname"], pa.string()),
        "location": pa.array(rows["location"], pa.string()),
    }).cast(info.arrow_schema())
    writer.upsert(info.path, table, info.key_columns)


def setup(spark, tmp: Path, table: str, trigger: str, options: str = ""):
    wh = Warehouse(tmp / "warehouse", spark=spark)
    list(statements.run(wh, SCHEMA.format(table=table)))
    (stmt,) = parse(f"CREATE STREAM power.s_{table} {trigger} FROM power.{table} PARTITION BY tbname {options} "
                    f"INTO power.out_{table} AS SELECT _twstart, count(*) FROM power.{table}")
    info = wh.catalog.resolve(m.TableName(table, "power"), "power")
    plan = plan_trigger(stmt, wh.catalog, "power")
    opts = detector.DetectorOptions(events_path=str(tmp / f"events_{table}"), checkpoint=str(tmp / f"cp_{table}"),
                                    starting_version=0)
    return wh, info, plan, opts


def events_table(opts) -> pd.DataFrame:
    try:
        return DeltaTable(opts.events_path).to_pandas()
    except TableNotFoundError:  # no commit yet (a run may be killed before its first one)
        return pd.DataFrame(columns=["trigger_id", "event_type", "window_start", "window_end", "row_count",
                                     "batch_id", "seq"])


def key(frame: pd.DataFrame) -> list[tuple]:
    cols = ["trigger_id", "event_type", "window_start", "window_end", "row_count", "cur_state", "next_state"]
    out = frame[cols].copy()
    for c in ("window_start", "window_end"):
        out[c] = pd.to_datetime(out[c], utc=True)
    out = out.astype(str)
    return sorted(map(tuple, out.itertuples(index=False)))


def run_available_now(plan, opts, *, max_files: int | None = None) -> int:
    """Run the detector until it has read the table as it is; how many batches it ran."""
    return detector.Detector(plan, dataclasses.replace(opts, max_files_per_trigger=max_files)).run_available()


@settings(max_examples=6, deadline=None, suppress_health_check=list(HealthCheck))
@given(seed=st.integers(0, 1000), kind=st.sampled_from(sorted(TRIGGERS)),
       commits=st.integers(2, 6), disorder=st.sampled_from([0.0, 0.5, 0.99]))
def test_streaming_windows_equal_batch_windows(spark, tmp_path_factory, seed, kind, commits, disorder):
    tmp = tmp_path_factory.mktemp("stream")
    watermark = "STREAM_OPTIONS(WATERMARK(5s)|EVENT_TYPE(WINDOW_OPEN|WINDOW_CLOSE))"
    wh, info, plan, opts = setup(spark, tmp, "m", TRIGGERS[kind], watermark)
    rows = make_rows(seed)
    # arrival order: each row is delayed by up to `disorder` of the 5 s watermark, so rows arrive out
    # of order but never behind a group's watermark
    rng = np.random.default_rng(seed)
    arrival = rows["ts"] + rng.uniform(0, disorder * 5 * S, len(rows))
    rows = rows.iloc[np.argsort(arrival.to_numpy(), kind="stable")].reset_index(drop=True)
    cuts = sorted(rng.choice(np.arange(1, len(rows)), size=commits - 1, replace=False).tolist())
    for a, b in zip([0, *cuts], [*cuts, len(rows)]):
        write(info, rows.iloc[a:b])
    assert run_available_now(plan, opts, max_files=1) == commits  # a batch per commit
    streamed = events_table(opts)
    batch = detect(spark.read.format("delta").load(plan.path), plan).toPandas()
    assert len(batch) > 0
    assert key(streamed) == key(batch)


def test_state_window_of_several_keys_streams_as_batch_and_as_worked_out_by_hand(spark, tmp_path):
    """STATE_WINDOW(voltage, current > 10) EXTEND(1) ZEROTH_STATE(NO_ZEROTH, FALSE) (TDengine 3.4.x)
    over three commits: a partly NULL row joins the window before it (its known key agrees), one
    whose known key disagrees is a window of its own, an all-NULL row takes no part, windows whose
    second key is false are dropped, and each window ends a millisecond (the database's precision)
    before the next one."""
    wh, info, plan, opts = setup(spark, tmp_path, "mk",
                                 "STATE_WINDOW(voltage, current > 10) EXTEND(1) ZEROTH_STATE(NO_ZEROTH, FALSE)",
                                 "STREAM_OPTIONS(EVENT_TYPE(WINDOW_OPEN|WINDOW_CLOSE))")
    n = np.nan
    rows = pd.DataFrame({
        "ts": np.arange(1, 11) * S,
        "current": [12.0, 15.0, n, 5.0, n, 4.0, 11.0, 11.0, 11.0, 1.0],
        "voltage": pd.Series([220, 220, 220, 221, None, 221, None, 220, 220, 222], dtype=object),
        "tbname": "d1", "location": "SF",
    })
    for part in (slice(0, 3), slice(3, 7), slice(7, 10)):
        write(info, rows.iloc[part])
    assert run_available_now(plan, opts, max_files=1) == 3
    streamed = events_table(opts)
    batch = detect(spark.read.format("delta").load(plan.path), plan).toPandas()
    assert key(streamed) == key(batch)
    ms = 1000
    closes = streamed[streamed["event_type"] == "WINDOW_CLOSE"].sort_values("window_start")
    got = [(int(r.window_start.value // 1000), int(r.window_end.value // 1000), r.row_count, r.cur_state, r.next_state)
           for r in closes.itertuples(index=False)]
    assert got == [(1 * S, 4 * S - ms, 3, "[220, true]", "[221, false]"),
                   (7 * S, 8 * S - ms, 1, "[null, true]", "[220, true]"),
                   (8 * S, 10 * S - ms, 2, "[220, true]", "[222, false]")]
    opens = streamed[streamed["event_type"] == "WINDOW_OPEN"].sort_values("window_start")
    assert [(int(r.window_start.value // 1000), r.prev_state) for r in opens.itertuples(index=False)] == [
        (1 * S, None), (7 * S, "[221, false]"), (8 * S, "[null, true]")]
    close = closes.iloc[1].to_dict()
    assert window_fields("State", "WINDOW_CLOSE", close, "ms") == {
        "windowStart": 7000, "windowEnd": 7999, "curState": [None, True], "nextState": [220, True]}


def test_restart_from_checkpoint_continues_without_loss_or_duplicates(spark, tmp_path):
    wh, info, plan, opts = setup(spark, tmp_path, "r", TRIGGERS["state"])
    rows = make_rows(7)
    rows = rows.sort_values("ts", kind="stable")
    thirds = np.array_split(np.arange(len(rows)), 3)
    for part in thirds:
        write(info, rows.iloc[part])
        detector.Detector(plan, opts).run_available()
    streamed = events_table(opts)
    batch = detect(spark.read.format("delta").load(plan.path), plan).toPandas()
    assert key(streamed) == key(batch)
    assert streamed["trigger_id"].is_unique  # one close per window, none twice


def test_streams_on_one_feed_share_each_versions_rows_and_detect_as_they_would_alone(spark, tmp_path, monkeypatch):
    wh, info, plan, opts = setup(spark, tmp_path, "sh", TRIGGERS["state"])
    (other,) = parse("CREATE STREAM power.s_sh2 STATE_WINDOW(voltage) FROM power.sh PARTITION BY tbname "
                     "INTO power.out_sh2 AS SELECT _twstart, count(*) FROM power.sh")
    plan2 = plan_trigger(other, wh.catalog, "power")
    assert (plan2.columns, plan2.keys) == (plan.columns, plan.keys)
    conversions = []
    counted = detector.group_codes
    monkeypatch.setattr(detector, "group_codes", lambda *a: conversions.append(1) or counted(*a))
    rows = make_rows(11).sort_values("ts", kind="stable")
    for part in np.array_split(np.arange(len(rows)), 3):
        write(info, rows.iloc[part])
    shared = detector.ChangeFeed(plan.path)
    runs = {}
    for name, p in (("a", plan), ("b", plan2)):
        o = dataclasses.replace(opts, events_path=str(tmp_path / f"shared_{name}"),
                                checkpoint=str(tmp_path / f"cs_{name}"), max_files_per_trigger=1)
        step = detector.Detector(p, o, feed=shared)
        if name == "a":  # a stream changing its rows changes no other stream's
            original = step._rows

            def mutating(offset, original=original):
                frame = original(offset)
                if frame is not None:
                    frame["voltage"] = -1
                return frame

            step._rows = mutating
        assert step.run_available() == 3
        runs[name] = events_table(o)
    assert len(conversions) == 3  # once per version: the second stream reads the first one's frames
    alone = dataclasses.replace(opts, events_path=str(tmp_path / "alone"), checkpoint=str(tmp_path / "ca"))
    detector.Detector(plan2, alone).run_available()
    assert len(runs["b"]) > 0
    assert key(runs["b"]) == key(events_table(alone))


KILLED_RUN = textwrap.dedent("""
    import sys, time
    from airflow_stream_provider.sql import parse
    from airflow_stream_provider.warehouse.catalog import Catalog
    from airflow_stream_provider.windows import detector, live
    from airflow_stream_provider.windows.trigger_plan import plan_trigger
    root, events, checkpoint, trigger = sys.argv[1:5]
    (stmt,) = parse(f"CREATE STREAM power.s_k {trigger} FROM power.k PARTITION BY tbname "
                    "INTO power.out_k AS SELECT _twstart, count(*) FROM power.k")
    plan = plan_trigger(stmt, Catalog(__import__("pathlib").Path(root)), "power")
    opts = detector.DetectorOptions(events_path=events, checkpoint=checkpoint, starting_version=0)
    query = live.LiveDetector(detector.Detector(plan, opts), name="under-test").start()
    print("started", flush=True)
    query.awaitTermination()
""")


def test_killed_detector_resumes_exactly_once(spark, tmp_path):
    wh, info, plan, opts = setup(spark, tmp_path, "k", TRIGGERS["state"])
    rows = make_rows(11, n=200).sort_values("ts", kind="stable")
    parts = np.array_split(np.arange(len(rows)), 12)
    script = tmp_path / "run.py"
    script.write_text(KILLED_RUN)
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}

    def launch() -> subprocess.Popen:
        proc = subprocess.Popen([sys.executable, str(script), str(tmp_path / "warehouse"), opts.events_path,
                                 opts.checkpoint, TRIGGERS["state"]], env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.DEVNULL, text=True, start_new_session=True)
        assert proc.stdout.readline().strip() == "started"
        return proc

    proc = launch()
    try:
        for i, part in enumerate(parts):
            write(info, rows.iloc[part])
            time.sleep(0.4)
            if i in (3, 7):  # kill -9 the whole Spark application mid-run, then restart it
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=30)
                proc = launch()
        # a restarted Spark application catches up in well under a minute alone, in minutes under a
        # loaded suite: the wait is for correctness, not speed
        deadline = time.monotonic() + 300
        batch = detect(spark.read.format("delta").load(plan.path), plan).toPandas()
        while time.monotonic() < deadline and len(events_table(opts)) < len(batch):
            time.sleep(1)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    streamed = events_table(opts)
    assert key(streamed) == key(batch)
    assert streamed["trigger_id"].is_unique


def test_a_replayed_batch_is_written_once(spark, tmp_path):
    """A batch's events and its (app id, batch id) transaction are one commit: a batch run again
    after a crash finds its transaction and writes nothing; another detector's batch ids are its own.
    Spark reads the table the kernel wrote."""
    path = str(tmp_path / "events")

    def batch(batch_id: int, n: int) -> list[pd.DataFrame]:  # event rows as the window core makes them
        frame = pd.DataFrame({name: [None] * n for name in EVENT_COLUMNS})
        frame["trigger_id"] = [f"{batch_id}:{i}" for i in range(n)]
        return [frame]

    def stored() -> list[str]:
        return sorted(DeltaTable(path).to_pyarrow_table(columns=["trigger_id"])["trigger_id"].to_pylist())

    def write(*args) -> int:
        written = write_events(*args)
        return 0 if written is None else written.num_rows

    assert write(batch(0, 3), path, "app", 0, 1_000) == 3
    assert write(batch(0, 3), path, "app", 0, 1_000) == 3  # replayed: skipped
    assert stored() == ["0:0", "0:1", "0:2"]
    assert write(batch(1, 2), path, "app", 1, 2_000) == 2
    assert write([], path, "app", 2, 3_000) == 0  # no events: no commit
    assert DeltaTable(path).version() == 1
    assert write(batch(0, 1), path, "other-app", 0, 3_000) == 1  # its own batch 0
    table = DeltaTable(path)
    assert stored() == ["0:0", "0:0", "0:1", "0:2", "1:0", "1:1"]
    assert table.transaction_version("app") == 1 and table.transaction_version("other-app") == 0
    assert table.metadata().configuration["delta.dataSkippingStatsColumns"] == EVENT_STATS_COLUMNS
    rows = spark.read.format("delta").load(path).orderBy("batch_id", "seq").collect()
    assert [(r.batch_id, r.seq) for r in rows] == [(0, 0), (0, 0), (0, 1), (0, 2), (1, 0), (1, 1)]
    assert rows[-1].event_time.timestamp() == 2.0  # the batch's processing time, in seconds


def test_an_event_table_is_compacted_and_still_skips_replayed_batches(tmp_path, monkeypatch):
    """Every COMPACT_EVERY commits the event table's small files are joined; the transactions stay,
    so a batch replayed after a compaction is still skipped."""
    monkeypatch.setattr(writer, "COMPACT_EVERY", 4)
    monkeypatch.setattr(writer, "compaction_skew", lambda path: 0)  # due on the multiples of 4
    path = str(tmp_path / "events")

    def batch(batch_id: int) -> list[pd.DataFrame]:
        frame = pd.DataFrame({name: [None] for name in EVENT_COLUMNS})
        frame["trigger_id"] = [f"{batch_id}:0"]
        return [frame]

    for batch_id in range(10):
        write_events(batch(batch_id), path, "app", batch_id, 1_000 * batch_id)
    write_events(batch(9), path, "app", 9, 9_000)  # replayed after the compactions: skipped
    table = DeltaTable(path)
    # batches 0 to 9 made versions 0 to 4, 6 to 8 and 10 to 11; compactions 5 and 9
    assert [h["version"] for h in table.history() if h["operation"] == "OPTIMIZE"] == [9, 5]
    assert len(table.file_uris()) <= 4
    assert sorted(table.to_pyarrow_table(columns=["trigger_id"])["trigger_id"].to_pylist()) == [
        f"{b}:0" for b in range(10)]
    assert table.transaction_version("app") == 9


def most_at_once(turns: Turns, batches: int) -> int:
    """How many of ``batches`` batches of 20 ms, started together, ran at once at the most."""
    import threading

    inside, most, lock = [0], [0], threading.Lock()

    def batch() -> None:
        with turns.turn():
            with lock:
                inside[0] += 1
                most[0] = max(most[0], inside[0])
            time.sleep(0.02)
            with lock:
                inside[0] -= 1

    workers = [threading.Thread(target=batch) for _ in range(batches)]
    for thread in workers:
        thread.start()
    for thread in workers:
        thread.join(10)
    assert inside[0] == 0
    return most[0]


def turns_taken(turns: Turns, asks: list[tuple[str, dict]]) -> list[str]:
    """The order in which batches asking one after the other (name, ``Turns.turn``'s arguments) get
    their turns, all asking while a first batch holds the one slot ("first", which ends first)."""
    import threading

    order: list[str] = []
    held, release = threading.Event(), threading.Event()

    def first() -> None:
        with turns.turn():
            held.set()
            release.wait(10)
            order.append("first")

    def batch(name: str, kind: dict) -> None:
        with turns.turn(**kind):
            order.append(name)

    threads = [threading.Thread(target=first)]
    threads[0].start()
    assert held.wait(10)
    for name, kind in asks:
        threads.append(threading.Thread(target=batch, args=(name, kind)))
        threads[-1].start()
        deadline = time.monotonic() + 10
        while len(turns._waiting) + len(turns._later) < len(threads) - 1 and time.monotonic() < deadline:
            time.sleep(0.001)  # each asks after the one before
    release.set()
    for thread in threads:
        thread.join(10)
    return order


def test_batches_take_their_turns_in_the_order_they_asked():
    """With one slot, the detectors woken while a batch runs go one after the other, first come first
    served, after the computation of a batch already detected, which asked last; with two, two
    batches run at once and never three."""
    turns = Turns(1, max_wait_s=60)  # (no batch here waits long enough to run over)
    asks = [("b", {}), ("c", {}), ("d", {}), ("compute", {"first": True})]
    assert turns_taken(turns, asks) == ["first", "compute", "b", "c", "d"]

    assert most_at_once(Turns(2, max_wait_s=60), 8) == 2
    with pytest.raises(ValueError, match="at least one batch slot"):
        Turns(0)


def test_the_batches_expected_to_report_the_most_windows_take_their_turns_first():
    """With one slot held, the batches that asked go by the windows they are expected to report, the
    most first (equal ones in the order they asked), after the computation of a batch already
    detected and before a batch expected to report none. Taken so, the results wait least in all:
    a batch reporting 10 windows served before one of 3 saves 10 waits for 3 added."""
    asks = [("none", {"expected": False}), ("three", {"weight": 3}), ("ten", {"weight": 10}),
            ("three again", {"weight": 3}), ("zero", {"weight": 0}), ("compute", {"first": True})]
    assert turns_taken(Turns(1, max_wait_s=60), asks) == [
        "first", "compute", "ten", "three", "three again", "zero", "none"]


def test_a_batch_holding_its_turn_long_delays_the_others_by_the_longest_wait_only():
    """A batch that keeps its turn (its computation waits for Spark, its notifications for a
    receiver) holds the others back for ``max_wait_s``; then they run beside it. Once it ends, the
    slot count holds again."""
    import threading

    turns = Turns(1, max_wait_s=0.2)
    held, release = threading.Event(), threading.Event()

    def stuck() -> None:
        with turns.turn():
            held.set()
            release.wait(10)

    slow = threading.Thread(target=stuck)
    slow.start()
    assert held.wait(10)
    began = time.monotonic()
    with turns.turn():  # waits 0.2 s, then runs over the slot
        waited = time.monotonic() - began
    assert 0.15 <= waited < 5
    release.set()
    slow.join(10)
    assert most_at_once(turns, 4) == 1  # back to one slot: a second batch waits while the first runs


def test_batches_expected_to_report_windows_take_their_turns_first():
    """With one slot, the batches not expected to report a window wait until those expected to have
    had their turns, each kind in the order it asked."""
    turns = Turns(1, max_wait_s=60)
    asks = [("quiet1", {"expected": False}), ("b", {}), ("quiet2", {"expected": False}), ("c", {})]
    assert turns_taken(turns, asks) == ["first", "b", "c", "quiet1", "quiet2"]
    with turns.turn(expected=False):  # a free slot is taken at once, expected or not
        assert turns._free == 0


def test_a_batch_that_wrote_its_results_steps_back_behind_the_batches_expected_to_report_windows():
    """A batch that has written its results (LOW_LATENCY_CALC) does the rest of its work (its events'
    and checkpoint's commits) after the batches waiting that are expected to report windows, and
    before those expected to report none, which wait for every result as before."""
    import threading

    turns = Turns(1, max_wait_s=60)
    order: list[str] = []
    stepping, resumed = threading.Event(), threading.Event()

    def live() -> None:
        with turns.turn():
            order.append("live: results")
            stepping.wait(10)
            step_back()
            order.append("live: the rest")
            resumed.set()

    def batch(name: str, kind: dict) -> None:
        with turns.turn(**kind):
            order.append(name)

    threads = [threading.Thread(target=live)]
    threads[0].start()
    deadline = time.monotonic() + 10
    while not order and time.monotonic() < deadline:
        time.sleep(0.001)
    for name, kind in [("quiet", {"expected": False}), ("b", {"weight": 2}), ("c", {"weight": 5})]:
        threads.append(threading.Thread(target=batch, args=(name, kind)))
        threads[-1].start()
        while len(turns._waiting) + len(turns._later) < len(threads) - 1 and time.monotonic() < deadline:
            time.sleep(0.001)
    stepping.set()
    assert resumed.wait(10)
    for thread in threads:
        thread.join(10)
    # the rest queues behind "quiet": neither reports a window, and they go in the order they asked
    assert order == ["live: results", "c", "b", "quiet", "live: the rest"]
    step_back()  # without a turn held: nothing to hand on
    assert turns._free == 1


def test_a_stream_reporting_every_third_batch_is_expected_to_every_third_batch(spark, tmp_path):
    # (a column to count: its batches are never held, as COUNT_WINDOW(3)'s are between closes)
    wh, info, plan, opts = setup(spark, tmp_path, "q", "COUNT_WINDOW(3, 3, current)")
    step = detector.Detector(plan, dataclasses.replace(opts, max_files_per_trigger=1))
    expected, reported = [], []
    for second in range(13):  # one row a second: a window closes at every third row
        write(info, pd.DataFrame({"ts": [second * S], "current": [1.0], "voltage": [220], "tbname": ["d1"],
                                  "location": ["SF"]}))
        expected.append(step.expects_windows())
        ran = step.run_once()
        assert ran is not None
        reported.append(ran.events > 0)
    assert reported == [second % 3 == 2 for second in range(13)]
    assert expected[:1] == [True]  # nothing known yet
    # from the second report on, the stream is expected in the batches that report, and only there
    assert expected[7:] == reported[7:]


def _every_second(info, step, seconds, meters=("d1", "d2")) -> list[int]:
    """Write one row per meter per second, one commit each, running the detector after each as a
    live one does; the seconds after which a batch ran."""
    ran = []
    for second in seconds:
        write(info, pd.DataFrame({"ts": [second * S] * len(meters), "current": [1.0] * len(meters),
                                  "voltage": [220] * len(meters), "tbname": list(meters),
                                  "location": ["SF"] * len(meters)}))
        if step.run_available():
            ran.append(second)
    return ran


def test_interval_batches_that_can_close_no_window_are_held_and_read_with_the_next(spark, tmp_path):
    wh, info, plan, opts = setup(spark, tmp_path, "h", "INTERVAL(3s) SLIDING(3s)")
    step = detector.Detector(plan, opts)
    before = step.batch
    # the first batch runs (nothing is known of the meters); then a batch runs when its rows reach
    # the end of a window, 3, 6, 9 and 12 s, reading the seconds held before it
    assert _every_second(info, step, range(13)) == [0, 3, 6, 9, 12]
    assert step.batch - before == 5 and step.held is None
    held = events_table(opts)
    assert sorted(held["window_start"].astype("int64") // 1000) == sorted([0, 3_000, 6_000, 9_000] * 2)
    assert (held["event_type"] == "WINDOW_CLOSE").all() and (held["row_count"] == 3).all()
    # the events every batch run alone finds (nothing held) and batch mode finds
    alone = dataclasses.replace(opts, events_path=str(tmp_path / "alone"), checkpoint=str(tmp_path / "ca"),
                                max_files_per_trigger=1)
    assert detector.Detector(plan, alone).run_available() == 13
    assert key(held) == key(events_table(alone))
    assert key(held) == key(detect(spark.read.format("delta").load(plan.path), plan).toPandas())


def test_count_window_batches_that_can_close_no_window_are_held(spark, tmp_path):
    wh, info, plan, opts = setup(spark, tmp_path, "hc", "COUNT_WINDOW(3)")
    step = detector.Detector(plan, opts)
    # a window closes at every meter's third row: the rows of seconds 2, 5 and 8
    assert _every_second(info, step, range(9)) == [0, 2, 5, 8]
    held = events_table(opts)
    assert sorted(held["window_start"].astype("int64") // S) == [0, 0, 3, 3, 6, 6]
    assert (held["row_count"] == 3).all()
    alone = dataclasses.replace(opts, events_path=str(tmp_path / "alone"), checkpoint=str(tmp_path / "ca"),
                                max_files_per_trigger=1)
    detector.Detector(plan, alone).run_available()
    assert key(held) == key(events_table(alone))


def test_a_batch_is_held_for_at_most_hold_versions(spark, tmp_path, monkeypatch):
    monkeypatch.setattr(detector, "HOLD_VERSIONS", 1)
    wh, info, plan, opts = setup(spark, tmp_path, "hv", "INTERVAL(10s) SLIDING(10s)")
    step = detector.Detector(plan, opts)
    assert _every_second(info, step, range(6)) == [0, 2, 4]  # held one version, run with the second


def test_batches_with_an_open_window_reported_late_rows_or_new_meters_are_not_held(spark, tmp_path):
    wh, info, plan, opts = setup(spark, tmp_path, "o", "INTERVAL(10s) SLIDING(10s)",
                                 "STREAM_OPTIONS(EVENT_TYPE(WINDOW_OPEN|WINDOW_CLOSE))")
    assert _every_second(info, detector.Detector(plan, opts), range(4)) == [0, 1, 2, 3]  # openings are told
    wh, info, plan, opts = setup(spark, tmp_path, "l", "INTERVAL(10s) SLIDING(10s)")
    step = detector.Detector(plan, opts)
    assert _every_second(info, step, [10, 11, 12]) == [10]
    assert _every_second(info, step, [5]) == [5]  # a late row: it may change a window decided before
    assert _every_second(info, step, [13], meters=("d1", "d3")) == [13]  # d3: its state is not known yet
    assert _every_second(info, step, [14], meters=("d1", "d3")) == []


def test_a_held_batch_is_read_again_after_a_restart(spark, tmp_path):
    wh, info, plan, opts = setup(spark, tmp_path, "hr", "INTERVAL(5s) SLIDING(5s)")
    step = detector.Detector(plan, opts)
    assert _every_second(info, step, range(4)) == [0]
    assert step.held is not None and step.position < step.held
    again = detector.Detector(plan, opts)  # the held versions were never committed: read again, with the
    assert _every_second(info, again, range(4, 6)) == [4, 5]  # next, in a batch (its meters not known yet)
    assert sorted(events_table(opts)["window_start"].astype("int64")) == [0, 0]
    assert events_table(opts)["row_count"].tolist() == [5, 5]


def test_a_batch_waiting_elsewhere_hands_its_turn_on_and_takes_the_next_back_first():
    """A batch whose computation waits for Spark (or its notifications for a receiver) is not
    holding the process's one slot meanwhile: the next batch runs; when the wait ends, the batch
    resumes as soon as the slot is free, before the batches that asked after it. Outside a turn,
    ``elsewhere`` changes nothing."""
    import threading

    turns = Turns(1, max_wait_s=60)
    order: list[str] = []
    waiting, answered, second_in = threading.Event(), threading.Event(), threading.Event()
    second_may_end = threading.Event()

    def spark_batch() -> None:
        with turns.turn():
            order.append("a computes")
            with elsewhere():
                waiting.set()
                answered.wait(10)
            order.append("a writes")

    def second() -> None:
        with turns.turn():
            second_in.set()
            order.append("b")
            second_may_end.wait(10)

    def third() -> None:
        with turns.turn():
            order.append("c")

    a = threading.Thread(target=spark_batch)
    a.start()
    assert waiting.wait(10)
    b = threading.Thread(target=second)
    b.start()
    assert second_in.wait(10)  # the slot was handed on while a waits
    c = threading.Thread(target=third)
    c.start()
    deadline = time.monotonic() + 10
    while len(turns._waiting) < 1 and time.monotonic() < deadline:
        time.sleep(0.001)
    answered.set()  # a's answer comes while b runs: a queues before c, which asked earlier
    while len(turns._waiting) < 2 and time.monotonic() < deadline:
        time.sleep(0.001)
    second_may_end.set()
    for thread in (a, b, c):
        thread.join(10)
    assert order == ["a computes", "b", "a writes", "c"]
    assert most_at_once(turns, 4) == 1  # one slot still

    with elsewhere():  # no turn held
        order.append("outside")
    assert order[-1] == "outside"


def test_the_nodes_batch_slots_come_from_the_environment(monkeypatch):
    from airflow_stream_provider.node.host import BATCH_SLOTS, batch_slots

    monkeypatch.delenv("AIRFLOW_STREAM_NODE_BATCH_SLOTS", raising=False)
    assert batch_slots() == BATCH_SLOTS == 1
    monkeypatch.setenv("AIRFLOW_STREAM_NODE_BATCH_SLOTS", " 3 ")
    assert batch_slots() == 3
    monkeypatch.setenv("AIRFLOW_STREAM_NODE_BATCH_SLOTS", "two")
    with pytest.raises(ValueError, match="AIRFLOW_STREAM_NODE_BATCH_SLOTS is a number of batches, not 'two'"):
        batch_slots()
