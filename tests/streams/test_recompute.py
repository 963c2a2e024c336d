"""Late changes to windows a stream already reported, and a lost detector checkpoint, end to end.

An update (an INSERT with an existing timestamp into the same subtable) of a row in a closed window
is out-of-order data and is recalculated (reference 000, "Data Updates"), for every window trigger
but COUNT_WINDOW. The oracles: the same stream created fresh over the final table with
FILL_HISTORY_FIRST (batch mode), and each window's values worked out in pandas from the final rows.
"""

from __future__ import annotations

import shutil
from datetime import UTC, datetime, timedelta

import pandas as pd
import pyarrow as pa
import pytest
from deltalake import DeltaTable

from airflow_stream_provider.exceptions import StreamError
from airflow_stream_provider.streams.fire.windows import pending_windows
from airflow_stream_provider.streams.run import run as run_stream
from airflow_stream_provider.streams.run_request import RunRequest
from airflow_stream_provider.streams.runtime import RunReport, StreamRuntime
from airflow_stream_provider.streams.store import StreamStore
from airflow_stream_provider.streams.write import write_results
from tests.conftest import sql

pytestmark = pytest.mark.spark

T0 = datetime(2025, 1, 1, tzinfo=UTC)

SCHEMA = """
CREATE STABLE m (ts TIMESTAMP, col1 INT, st INT) TAGS (loc VARCHAR(20));
CREATE TABLE t1 USING m TAGS ('a');
CREATE TABLE t2 USING m TAGS ('b');
"""
# (minute, col1, st): st ends an event window at 2, and splits state windows where it changes
T1 = [(0, 1, 1), (1, 3, 1), (2, 5, 2), (6, 10, 1), (7, 20, 2), (12, 7, 1), (13, 9, 2), (20, 4, 1)]
T2 = [(0, 2, 1), (3, 4, 2), (8, 6, 1), (9, 8, 2), (21, 1, 1)]

QUERY = "SELECT _twstart, avg(col1), max(col1), count(*) FROM %%tbname WHERE _c0 >= _twstart AND _c0 {op} _twend"
TRIGGERS = {
    "interval": ("INTERVAL(5m) SLIDING(5m)", "<"),
    "session": ("SESSION(ts, 3m)", "<="),
    "state": ("STATE_WINDOW(st)", "<="),
    "event": ("EVENT_WINDOW(START WITH st = 1 END WITH st = 2)", "<="),
}


@pytest.fixture
def wh(wh):
    sql(wh, "CREATE DATABASE d; USE d")
    sql(wh, SCHEMA)
    return wh


def stamp(minute: float) -> str:
    return (T0 + timedelta(minutes=minute)).strftime("%Y-%m-%d %H:%M:%S")


def insert(wh, table: str, rows) -> None:
    sql(wh, f"INSERT INTO {table} VALUES " + " ".join(f"('{stamp(t)}', {v}, {s})" for t, v, s in rows))


def create(wh, name: str, trigger: str, op: str, options: str = "") -> None:
    sql(wh, f"CREATE STREAM {name} {trigger} FROM m PARTITION BY tbname {options} INTO {name}_out AS "
            + QUERY.format(op=op))


def output(wh, name: str) -> dict[tuple, tuple]:
    rows = sql(wh, f"SELECT * FROM {name}_out")[-1].table.to_pylist()
    return {(r["tag_tbname"], r["_twstart"]): (r["avg_col1"], r["max_col1"], r["count"]) for r in rows}


def events(name: str) -> pd.DataFrame:
    return DeltaTable(str(StreamStore().get("d", name).events_path)).to_pandas()


def fresh(wh, name: str, trigger: str, op: str) -> dict[tuple, tuple]:
    """The same stream created over the table as it is now, its history computed in batch mode."""
    create(wh, f"{name}_fresh", trigger, op, "STREAM_OPTIONS(FILL_HISTORY_FIRST)")
    run_stream(wh, "d", f"{name}_fresh")
    return output(wh, f"{name}_fresh")


def by_hand(wh, out: dict[tuple, tuple], end_inclusive: bool) -> None:
    """Each output window's values recomputed in pandas from the table's final rows."""
    rows = pd.DataFrame(sql(wh, "SELECT ts, col1, tbname FROM m")[-1].table.to_pylist())
    for (tb, start), (avg, top, n) in out.items():
        mine = rows[(rows["tbname"] == tb) & (rows["ts"] >= start)].sort_values("ts")
        # INTERVAL: up to the exclusive end; the others end at their last row, the n-th from the start
        mine = mine.iloc[:n] if end_inclusive else mine[mine["ts"] < start + timedelta(minutes=5)]
        assert len(mine) == n
        if n:
            assert (avg, top) == (pytest.approx(mine["col1"].mean()), mine["col1"].max())


@pytest.mark.parametrize("kind", sorted(TRIGGERS))
def test_update_in_a_closed_window_is_recomputed(wh, kind):
    trigger, op = TRIGGERS[kind]
    create(wh, "s", trigger, op)
    insert(wh, "t1", T1)
    insert(wh, "t2", T2)
    run_stream(wh, "d", "s")
    before = output(wh, "s")
    first = events("s")
    window = ("t1", T0)  # closed and reported: its row at 00:01 changes value only
    assert window in before and before[window][1] != 99

    insert(wh, "t1", [(1, 99, 1)])  # the same timestamp in the same subtable: an update
    report = run_stream(wh, "d", "s")

    after = output(wh, "s")
    assert after[window][1] == 99 and after[window][2] == before[window][2]
    assert after == fresh(wh, "s", trigger, op)
    by_hand(wh, after, end_inclusive=op == "<=")
    # only the windows holding the row were computed again, under the trigger id they had
    assert {k: v for k, v in after.items() if k != window} == {k: v for k, v in before.items() if k != window}
    assert report.triggers == 1
    late = events("s")
    late = late[(late["batch_id"] > first["batch_id"].max()) & (late["event_type"] != "WINDOW_OPEN")]
    late = late.sort_values(["batch_id", "seq"])
    assert list(late["event_type"]) == ["WINDOW_INVALIDATION", "WINDOW_CLOSE"]
    old_id = first[(first["event_type"] == "WINDOW_CLOSE") & (first["group_keys"].str.contains('"t1"'))
                   & (first["window_start"] == pd.Timestamp(T0))]["trigger_id"].item()
    assert set(late["trigger_id"]) == {old_id}


@pytest.mark.parametrize("options", ["STREAM_OPTIONS(IGNORE_DISORDER)", "STREAM_OPTIONS(EXPIRED_TIME(30m))"])
def test_updates_are_dropped_when_disorder_is_ignored_or_expired(wh, options):
    """Updates are out-of-order data: IGNORE_DISORDER drops them, and so does EXPIRED_TIME when they
    are older than the latest row minus the expiry (00:01 < 01:30 - 30m)."""
    trigger, op = TRIGGERS["interval"]
    create(wh, "s", trigger, op, options)
    insert(wh, "t1", T1)
    run_stream(wh, "d", "s")
    insert(wh, "t1", [(90, 1, 1)])
    run_stream(wh, "d", "s")
    before = output(wh, "s")
    assert ("t1", T0) in before
    insert(wh, "t1", [(1, 99, 1)])
    assert run_stream(wh, "d", "s").triggers == 0
    assert output(wh, "s") == before


def test_count_window_ignores_updates(wh):
    """Reference 000: updates are ignored for COUNT_WINDOW; the output stays as it was."""
    create(wh, "s", "COUNT_WINDOW(2)", "<=")
    insert(wh, "t1", T1)
    run_stream(wh, "d", "s")
    before = output(wh, "s")
    insert(wh, "t1", [(1, 99, 1)])
    assert run_stream(wh, "d", "s").triggers == 0
    assert output(wh, "s") == before and before[("t1", T0)][1] == 3


def show(wh) -> dict:
    return {r["stream_name"]: r for r in sql(wh, "SHOW STREAMS")[-1].table.to_pylist()}


def test_lost_checkpoint_stops_the_stream_until_it_is_back(wh, capsys):
    """The checkpoint is removed after a run, more rows (late ones
    too) are written, and the next run refuses with a clear error that SHOW STREAMS shows. With
    the checkpoint back, the run catches up: outputs equal a fresh recomputation, no event twice."""
    from airflow_stream_provider.cli import main

    trigger, op = TRIGGERS["interval"]
    create(wh, "s", trigger, op)
    insert(wh, "t1", T1)
    insert(wh, "t2", T2)
    run_stream(wh, "d", "s")
    checkpoint = StreamStore().get("d", "s").checkpoint
    saved = checkpoint.parent / "saved-checkpoint"
    shutil.copytree(checkpoint, saved)
    shutil.rmtree(checkpoint)
    insert(wh, "t1", [(25, 6, 1), (31, 2, 1), (3, 50, 1)])  # new rows, and a late one in a closed window
    insert(wh, "t2", [(26, 3, 1), (33, 1, 1)])
    count = len(events("s"))

    with pytest.raises(StreamError, match="checkpoint .* is missing.*Restore the checkpoint, or DROP STREAM d.s"):
        run_stream(wh, "d", "s")
    assert main(["run", "--until-idle", "d.s"]) == 2
    assert "checkpoint" in capsys.readouterr().err
    status = show(wh)["s"]
    assert status["status"] == "failed" and "checkpoint" in status["last_error"]
    assert len(events("s")) == count  # nothing was detected again

    # another checkpoint in its place is refused too
    shutil.copytree(saved, checkpoint)
    metadata = checkpoint / "metadata"
    real = metadata.read_text()
    metadata.write_text('{"id":"00000000-0000-0000-0000-000000000000"}\n')
    with pytest.raises(StreamError, match="not the one it recorded"):
        run_stream(wh, "d", "s")

    metadata.write_text(real)
    report = run_stream(wh, "d", "s")
    assert report.triggers > 0
    assert show(wh)["s"]["status"] == "running"
    closes = events("s")
    closes = closes[closes["event_type"] == "WINDOW_CLOSE"]
    invalidated = events("s")
    invalidated = set(invalidated.loc[invalidated["event_type"] == "WINDOW_INVALIDATION", "trigger_id"])
    again = closes[closes.duplicated("trigger_id", keep=False)]
    assert set(again["trigger_id"]) <= invalidated  # a window closes twice only when recalculated
    assert output(wh, "s") == fresh(wh, "s", trigger, op)


#: late rows that extend every closed window of T1 and T2 by 30 s, each keeping its start
EXTENDING = {
    "session": {"t1": [(2.5, 40, 2), (7.5, 41, 2), (13.5, 42, 2)], "t2": [(3.5, 43, 2), (9.5, 44, 2)]},
    "state": {"t1": [(1.5, 40, 1), (2.5, 41, 2), (6.5, 42, 1), (7.5, 43, 2), (12.5, 44, 1), (13.5, 45, 2)],
              "t2": [(0.5, 46, 1), (3.5, 47, 2), (8.5, 48, 1), (9.5, 49, 2)]},
}


@pytest.mark.parametrize("kind", sorted(EXTENDING))
def test_a_run_over_closes_and_their_recalculations_keeps_the_latest(wh, kind):
    """One run can consume a window's close and, from a later detector batch, its invalidation and
    new close (an Airflow run whose commit was lost to a kill, or one that takes several batches):
    both closes fire, and the output keeps the result of the latest, in whatever order Spark
    returns the computed rows (here: reversed)."""
    trigger, op = TRIGGERS[kind]
    create(wh, "s", trigger, op)
    insert(wh, "t1", T1)
    insert(wh, "t2", T2)
    run_stream(wh, "d", "s", RunRequest(commit=False))  # computed and written, its progress not recorded
    before = output(wh, "s")
    for table, rows in EXTENDING[kind].items():
        insert(wh, table, rows)
    store = StreamStore()
    stored, state = store.get("d", "s"), store.load_state("d", "s")
    runtime = StreamRuntime(wh, stored.statement, "d", ())
    fired, _update, _events = pending_windows(runtime, stored, state, lambda _message: None)
    assert len(fired) == len(before) + sum(map(len, EXTENDING[kind].values()))  # both closes fire
    assert runtime.compute is not None
    results = runtime.compute.frame(fired, batched=True).toArrow()
    write_results(runtime, fired, results.take(pa.array(range(results.num_rows - 1, -1, -1))), RunReport("d.s"))
    after = output(wh, "s")
    assert set(after) == set(before)
    assert after == fresh(wh, "s", trigger, op)
    by_hand(wh, after, end_inclusive=True)


def test_expiry_is_judged_per_write_against_the_rows_written_before_it(wh):
    """Reference 000, "Expired Data": whether data is expired depends on when it is written, and data
    written in event-time order is never expired. One ascending INSERT of rows every 5 s from 0 s to
    60 s (state 1 up to 25 s, 2 from 30 s to 55 s, 3 at 60 s) closes two state windows, each of six
    rows. A later INSERT at 20 s is older than the 60 s written before it minus 10 s: expired,
    ignored; one at 52 s is not, and joins the second window, even when both come in one run."""
    sql(wh, "CREATE TABLE e (ts TIMESTAMP, st INT)")
    sql(wh, "CREATE STREAM s STATE_WINDOW(st) FROM e STREAM_OPTIONS(EXPIRED_TIME(10s)) INTO s_out AS "
            "SELECT _twstart ws, _twend we, count(*) n FROM %%trows")

    def write(*rows: tuple[int, int]) -> None:
        sql(wh, "INSERT INTO e VALUES " + " ".join(f"('{stamp(t / 60)}', {st})" for t, st in rows))

    def windows() -> list[tuple]:
        found = sql(wh, "SELECT ws, we, n FROM s_out ORDER BY ws")[-1].table.to_pylist()
        return [((r["ws"] - T0).seconds, (r["we"] - T0).seconds, r["n"]) for r in found]

    write(*((t, 1 if t <= 25 else 2 if t <= 55 else 3) for t in range(0, 61, 5)))
    run_stream(wh, "d", "s")
    assert windows() == [(0, 25, 6), (30, 55, 6)]
    write((20, 1))
    write((52, 2))
    run_stream(wh, "d", "s")
    assert windows() == [(0, 25, 6), (30, 55, 7)]
