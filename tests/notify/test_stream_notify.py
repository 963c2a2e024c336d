"""Streams that notify: real Spark and Delta, real detector, real WebSocket receivers.

Expected events are derived by hand from the rows each test writes, with the fields reference 000
lists per trigger type ("Notification Mechanism"); every message is checked against the schema.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from airflow_stream_provider.notify import delivery
from airflow_stream_provider.notify.message import validate
from airflow_stream_provider.streams import notifications
from airflow_stream_provider.streams.notifications import outbox_of
from airflow_stream_provider.streams.run import commit_progress
from airflow_stream_provider.streams.run import run as run_stream
from airflow_stream_provider.streams.run_request import RunRequest
from airflow_stream_provider.streams.store import StreamStore
from tests.conftest import sql
from tests.notify.conftest import events_of, notify_database

pytestmark = pytest.mark.spark

T0 = datetime(2025, 1, 1, tzinfo=UTC)
MS0 = int(T0.timestamp() * 1000)
MIN = 60_000


@pytest.fixture
def wh(wh, monkeypatch):
    yield from notify_database(wh, monkeypatch)


def select(wh, text: str) -> list[dict]:
    return sql(wh, text)[-1].table.to_pylist()


def received(rec) -> list[dict]:
    msgs = rec.messages()
    for msg in msgs:
        validate(msg)
    return events_of(msgs)


def brief(ev: dict) -> tuple:
    return (ev["eventType"], ev["windowStart"], ev.get("windowEnd"))


METERS = """
CREATE STABLE stb1 (ts TIMESTAMP, col1 INT) TAGS (loc VARCHAR(20));
CREATE TABLE t1 USING stb1 TAGS ('a');
CREATE TABLE t2 USING stb1 TAGS ('b');
"""


def test_interval_open_and_close_per_subtable(wh, receivers):
    rec = receivers()
    sql(wh, METERS)
    sql(wh, f"""CREATE STREAM avg_s INTERVAL(5m) SLIDING(5m) FROM stb1 PARTITION BY tbname
               NOTIFY('{rec.url}') ON (WINDOW_OPEN|WINDOW_CLOSE)
               INTO stb2 OUTPUT_SUBTABLE(concat('out_', %%tbname)) AS
               SELECT _twstart, avg(col1) FROM %%trows""")
    sql(wh, """INSERT INTO t1 VALUES ('2025-01-01 00:00:00', 1) ('2025-01-01 00:01:00', 3) ('2025-01-01 00:06:00', 10);
               INSERT INTO t2 VALUES ('2025-01-01 00:02:00', 7)""")
    report = run_stream(wh, "d", "avg_s")
    assert report.delivery.sent_events == report.notified == 4
    events = received(rec)
    by_table: dict = {}
    for ev in events:
        by_table.setdefault(ev["tableName"], []).append(ev)
    # t1: [0,5) opens and closes (avg of 1 and 3), [5,10) opens; t2: [0,5) opens
    assert [brief(e) for e in by_table["out_t1"]] == [
        ("WINDOW_OPEN", MS0, None), ("WINDOW_CLOSE", MS0, MS0 + 5 * MIN), ("WINDOW_OPEN", MS0 + 5 * MIN, None)]
    assert [brief(e) for e in by_table["out_t2"]] == [("WINDOW_OPEN", MS0, None)]
    opened, closed = by_table["out_t1"][:2]
    assert closed["result"] == {"_twstart": MS0, "avg(col1)": 2.0}
    assert "result" not in opened  # EVENT_TYPE is WINDOW_CLOSE: an open computes nothing
    assert opened["triggerId"] == closed["triggerId"] and opened["groupId"] == closed["groupId"]
    assert {e["triggerType"] for e in events} == {"Interval"}
    assert by_table["out_t1"][0]["groupId"] != by_table["out_t2"][0]["groupId"]
    # a late row in the closed window invalidates it and closes it again, with the same triggerId
    sql(wh, "INSERT INTO t1 VALUES ('2025-01-01 00:03:00', 5) ('2025-01-01 00:11:00', 1)")
    run_stream(wh, "d", "avg_s")
    later = [e for e in received(rec)[len(events):] if e["tableName"] == "out_t1"]
    kinds = [brief(e) for e in later]
    assert ("WINDOW_INVALIDATION", MS0, MS0 + 5 * MIN) in kinds
    again = [e for e in later if brief(e) == ("WINDOW_CLOSE", MS0, MS0 + 5 * MIN)]
    assert len(again) == 1 and again[0]["triggerId"] == closed["triggerId"]
    assert again[0]["result"]["avg(col1)"] == 3.0  # (1 + 3 + 5) / 3
    assert ("WINDOW_CLOSE", MS0 + 5 * MIN, MS0 + 10 * MIN) in kinds


def test_state_window_carries_the_states(wh, receivers):
    rec = receivers()
    sql(wh, "CREATE TABLE dev (ts TIMESTAMP, status INT, v DOUBLE)")
    sql(wh, f"""CREATE STREAM st STATE_WINDOW(status) FROM dev NOTIFY('{rec.url}') ON (WINDOW_OPEN|WINDOW_CLOSE)
               INTO st_out AS SELECT _twstart, count(*) n, max(v) FROM %%trows""")
    sql(wh, """INSERT INTO dev VALUES ('2025-01-01 00:00:00', 1, 1.5) ('2025-01-01 00:01:00', 1, 2.5)
               ('2025-01-01 00:02:00', 2, 9.0) ('2025-01-01 00:03:00', 2, 4.0) ('2025-01-01 00:04:00', 1, 0.5)""")
    run_stream(wh, "d", "st")
    events = received(rec)
    shape = [(e["eventType"], e["windowStart"], e.get("prevState", "-"), e["curState"], e.get("nextState", "-"))
             for e in events]
    assert shape == [
        ("WINDOW_OPEN", MS0, None, 1, "-"),
        ("WINDOW_CLOSE", MS0, "-", 1, 2),
        ("WINDOW_OPEN", MS0 + 2 * MIN, 1, 2, "-"),
        ("WINDOW_CLOSE", MS0 + 2 * MIN, "-", 2, 1),
        ("WINDOW_OPEN", MS0 + 4 * MIN, 2, 1, "-"),
    ]
    closes = [e for e in events if e["eventType"] == "WINDOW_CLOSE"]
    assert [(e["windowEnd"], e["result"]["n"], e["result"]["max(v)"]) for e in closes] == [
        (MS0 + 1 * MIN, 2, 2.5), (MS0 + 3 * MIN, 2, 9.0)]
    assert {e["triggerType"] for e in events} == {"State"} and {e["tableName"] for e in events} == {"st_out"}


def test_event_window_carries_the_trigger_condition(wh, receivers):
    rec = receivers()
    sql(wh, "CREATE TABLE env (ts TIMESTAMP, c1 INT, c2 INT)")
    sql(wh, f"""CREATE STREAM ev EVENT_WINDOW(START WITH c1 > 10 END WITH c2 < 5) FROM env
               NOTIFY('{rec.url}') ON (WINDOW_OPEN|WINDOW_CLOSE) INTO ev_out AS
               SELECT _twstart, max(c1) FROM %%trows""")
    sql(wh, """INSERT INTO env VALUES ('2025-01-01 00:00:00', 3, 9) ('2025-01-01 00:01:00', 12, 8)
               ('2025-01-01 00:02:00', 15, 7) ('2025-01-01 00:03:00', 4, 2) ('2025-01-01 00:04:00', 20, 1)""")
    run_stream(wh, "d", "ev")
    events = received(rec)
    # [00:01, 00:03] opens on c1 = 12 and closes on c2 = 2; 00:04 opens and closes on its own row
    shape = [(e["eventType"], e["windowStart"], e.get("windowEnd"), e["triggerCondition"]["conditionIndex"],
              e["triggerCondition"]["fieldValue"]) for e in events]
    assert shape[:2] == [
        ("WINDOW_OPEN", MS0 + MIN, None, 0, {"c1": 12}),
        ("WINDOW_CLOSE", MS0 + MIN, MS0 + 3 * MIN, 1, {"c2": 2}),
    ]
    assert events[1]["result"] == {"_twstart": MS0 + MIN, "max(c1)": 15}
    assert shape[2:] == [("WINDOW_OPEN", MS0 + 4 * MIN, None, 0, {"c1": 20}),
                         ("WINDOW_CLOSE", MS0 + 4 * MIN, MS0 + 4 * MIN, 1, {"c2": 1})]


def test_notify_only_count_window_and_calc_notify_only_with_where(wh, receivers):
    rec = receivers()
    sql(wh, "CREATE TABLE tb1 (ts TIMESTAMP, col1 INT)")
    sql(wh, f"""CREATE STREAM cnt COUNT_WINDOW(3) FROM tb1 NOTIFY('{rec.url}') ON (WINDOW_CLOSE)""")
    sql(wh, f"""CREATE STREAM big COUNT_WINDOW(2) FROM tb1 STREAM_OPTIONS(CALC_NOTIFY_ONLY)
               NOTIFY('{rec.url}') ON (WINDOW_CLOSE) WHERE avg_c > 5 AS SELECT avg(col1) avg_c FROM %%trows""")
    sql(wh, """INSERT INTO tb1 VALUES ('2025-01-01 00:00:00', 1) ('2025-01-01 00:01:00', 3)
               ('2025-01-01 00:02:00', 10) ('2025-01-01 00:03:00', 20) ('2025-01-01 00:04:00', 4)
               ('2025-01-01 00:05:00', 6) ('2025-01-01 00:06:00', 2)""")
    run_stream(wh, "d", "cnt")
    counts = received(rec)
    # windows of 3 rows: [00:00..00:02], [00:03..00:05]; the last row waits
    assert [brief(e) for e in counts] == [("WINDOW_CLOSE", MS0, MS0 + 2 * MIN),
                                          ("WINDOW_CLOSE", MS0 + 3 * MIN, MS0 + 5 * MIN)]
    assert [m["streams"][0]["streamName"] for m in rec.messages()] == ["cnt"]
    assert all("result" not in e and e["triggerType"] == "Count" for e in counts)
    report = run_stream(wh, "d", "big")
    # pairs average 2, 15 and 5: only 15 passes WHERE avg_c > 5
    big = received(rec)[len(counts):]
    assert [(brief(e), e["result"]) for e in big] == [(("WINDOW_CLOSE", MS0 + 2 * MIN, MS0 + 3 * MIN), {"avg_c": 15.0})]
    assert (report.result_rows, report.written) == (3, 0)  # computed, and not stored


def test_a_run_committing_less_than_was_delivered_sends_nothing_twice(wh, receivers):
    """An Airflow task attempt left running after its supervisor died pushes its progress after the
    retry has delivered more: the commit then records less than was delivered. The next run reads
    those batches again; their notifications were delivered once and stay so."""
    rec = receivers()
    sql(wh, "CREATE TABLE tb1 (ts TIMESTAMP, col1 INT)")
    sql(wh, f"CREATE STREAM cnt COUNT_WINDOW(2) FROM tb1 NOTIFY('{rec.url}') ON (WINDOW_CLOSE)")
    sql(wh, "INSERT INTO tb1 VALUES ('2025-01-01 00:00:00', 1) ('2025-01-01 00:01:00', 2)")  # batch 0: window A
    stale = run_stream(wh, "d", "cnt", RunRequest(commit=False))  # the attempt that outlives its supervisor
    sql(wh, "INSERT INTO tb1 VALUES ('2025-01-01 00:02:00', 3) ('2025-01-01 00:03:00', 4)")  # batch 1: window B
    retry = run_stream(wh, "d", "cnt", RunRequest(commit=False))
    stored = StreamStore().get("d", "cnt")
    notifications.deliver_outbox(stored)
    assert (stale.progress["consumed_batch"], retry.progress["consumed_batch"]) == (0, 1)
    commit_progress("d", "cnt", stale.progress)  # the stale attempt's progress is the one recorded
    sql(wh, "INSERT INTO tb1 VALUES ('2025-01-01 00:04:00', 5) ('2025-01-01 00:05:00', 6)")  # window C
    run_stream(wh, "d", "cnt")  # reads window B again, and C
    closes = [brief(e) for e in received(rec)]
    # windows of 2 rows, each closed once: [00:00, 00:01], [00:02, 00:03], [00:04, 00:05]
    assert closes == [("WINDOW_CLOSE", MS0 + 2 * i * MIN, MS0 + (2 * i + 1) * MIN) for i in range(3)]


def test_period_sends_on_time_events(wh, receivers):
    rec = receivers()
    sql(wh, "CREATE TABLE tb1 (ts TIMESTAMP, v INT)")
    sql(wh, f"CREATE STREAM tick PERIOD(1h) NOTIFY('{rec.url}')")
    sql(wh, f"CREATE STREAM hourly PERIOD(1h) FROM tb1 NOTIFY('{rec.url}') AS SELECT count(*) n FROM %%trows")
    store = StreamStore()
    created = datetime.now(UTC).replace(minute=0, second=0, microsecond=0) - timedelta(hours=2, minutes=30)
    for name in ("tick", "hourly"):
        store.save_state("d", name, store.load_state("d", name).replace(created=created))
    now = created + timedelta(hours=2, minutes=40)  # instants at created + 0:30, 1:30 and 2:30
    run_stream(wh, "d", "tick", RunRequest(now=now))
    run_stream(wh, "d", "hourly", RunRequest(now=now))
    events = received(rec)
    instants = [int((created + timedelta(minutes=30 + 60 * k)).timestamp() * 1000) for k in range(3)]
    tick = [e for e in events if e["tableName"].startswith("tick")]
    hourly = [e for e in events if e["tableName"].startswith("hourly")]
    assert [(e["eventType"], e["triggerType"], e["eventTime"]) for e in tick] == [
        ("ON_TIME", "Period", t) for t in instants]
    assert all("result" not in e for e in tick)
    assert [(e["eventTime"], e["result"]) for e in hourly] == [(t, {"n": 0}) for t in instants]


def test_an_attempt_outliving_its_supervisor_computes_no_period_instant_its_retry_committed(wh, receivers):
    """A PERIOD run's compute whose supervisor died is tried again by Airflow; the retry computes the
    instant, its notification is delivered and the run committed. The first attempt, still running,
    then computes the same instant: it does nothing, so the instant is sent once. A later try of the
    same run (the run cleared) and another run of the instant (a backfill) compute and send it."""
    rec = receivers()
    sql(wh, "CREATE TABLE tb1 (ts TIMESTAMP, v INT)")
    sql(wh, f"CREATE STREAM hourly PERIOD(1h) FROM tb1 NOTIFY('{rec.url}') INTO hourly_out AS "
            "SELECT cast(_tlocaltime / 1000000 AS TIMESTAMP) ts, count(*) n FROM %%trows")
    store = StreamStore()
    created = datetime.now(UTC).replace(minute=0, second=0, microsecond=0) - timedelta(hours=2)
    store.save_state("d", "hourly", store.load_state("d", "hourly").replace(created=created))
    at = created + timedelta(hours=1)
    run_id = f"scheduled__{at.isoformat()}"
    stored = store.get("d", "hourly")

    def attempt(run: str, tried: int):  # a PERIOD task's compute, notify and commit, as its DAG runs them
        report = run_stream(wh, "d", "hourly", RunRequest(at=at, commit=False, attempt=(run, tried)))
        notifications.deliver_outbox(stored)
        commit_progress("d", "hourly", report.progress)
        return report

    retry = attempt(run_id, 2)
    assert retry.superseded is None and retry.notified == 1
    assert store.load_state("d", "hourly").committed_tries == {run_id: 2}
    orphan = attempt(run_id, 1)  # the first attempt, after its retry's run committed
    assert orphan.superseded is not None and "try 2" in orphan.superseded
    assert (orphan.triggers, orphan.notified, orphan.progress) == (0, 0, {})
    instant = int(at.timestamp() * 1000)
    assert [(e["eventType"], e["eventTime"]) for e in received(rec)] == [("ON_TIME", instant)]
    cleared = attempt(run_id, 3)  # the run cleared: its next try computes and sends it again
    backfill = attempt(f"backfill__{at.isoformat()}", 1)
    assert (cleared.superseded, backfill.superseded) == (None, None)
    assert [e["eventTime"] for e in received(rec)] == [instant] * 3
    assert store.load_state("d", "hourly").committed_tries == {run_id: 3, f"backfill__{at.isoformat()}": 1}
    assert [r["n"] for r in select(wh, "SELECT * FROM hourly_out")] == [0]  # one row, written again in place

    # the retry's commit lands while the earlier try computes, after it looked: it queues nothing
    later = f"scheduled__{(at + timedelta(hours=1)).isoformat()}"
    retry = run_stream(wh, "d", "hourly", RunRequest(at=at + timedelta(hours=1), commit=False, attempt=(later, 2)))
    notifications.deliver_outbox(stored)

    def meanwhile(line: str) -> None:  # (said once the instant fired, before its computation)
        if "fired" in line:
            commit_progress("d", "hourly", retry.progress)

    orphan = run_stream(wh, "d", "hourly", RunRequest(at=at + timedelta(hours=1), commit=False, attempt=(later, 1),
                                                      progress=meanwhile))
    assert orphan.superseded is not None and "try 2" in orphan.superseded
    assert (orphan.triggers, orphan.notified, orphan.progress) == (1, 0, {})  # computed, nothing queued
    notifications.deliver_outbox(stored)
    assert [e["eventTime"] for e in received(rec)] == [instant] * 3 + [instant + 3_600_000]


def test_history_is_not_notified_without_notify_history(wh, receivers):
    rec_a, rec_b = receivers(), receivers()
    sql(wh, "CREATE TABLE tb1 (ts TIMESTAMP, col1 INT)")
    sql(wh, """INSERT INTO tb1 VALUES ('2025-01-01 00:00:00', 1) ('2025-01-01 00:01:00', 3)
               ('2025-01-01 00:06:00', 10)""")
    for name, rec, extra in (("quiet", rec_a, ""), ("loud", rec_b, "NOTIFY_OPTIONS(NOTIFY_HISTORY)")):
        sql(wh, f"""CREATE STREAM {name} INTERVAL(5m) SLIDING(5m) FROM tb1 STREAM_OPTIONS(FILL_HISTORY)
                   NOTIFY('{rec.url}') ON (WINDOW_CLOSE) {extra} INTO {name}_out AS
                   SELECT _twstart, sum(col1) s FROM %%trows""")
        run_stream(wh, "d", name)
        assert [r["s"] for r in select(wh, f"SELECT * FROM {name}_out")] == [4]  # history is computed
    assert received(rec_a) == []
    assert [(brief(e), e["result"]["s"]) for e in received(rec_b)] == [(("WINDOW_CLOSE", MS0, MS0 + 5 * MIN), 4)]


def test_on_failure_pause_holds_the_stream_until_delivered(wh, receivers, monkeypatch):
    rec = receivers(start=False)
    monkeypatch.setenv("AIRFLOW_STREAM_NOTIFY_PAUSE_SECONDS", "2")
    monkeypatch.setenv("AIRFLOW_STREAM_NOTIFY_MAX_BACKOFF", "0.5")
    sql(wh, "CREATE TABLE tb1 (ts TIMESTAMP, col1 INT)")
    sql(wh, f"""CREATE STREAM held COUNT_WINDOW(1) FROM tb1 NOTIFY('{rec.url}') ON (WINDOW_CLOSE)
               NOTIFY_OPTIONS(ON_FAILURE_PAUSE) INTO held_out AS SELECT _twstart, sum(col1) s FROM %%trows""")
    sql(wh, "INSERT INTO tb1 VALUES ('2025-01-01 00:00:00', 1) ('2025-01-01 00:01:00', 2)")
    with pytest.raises(delivery.DeliveryPaused, match="stream holds"):
        run_stream(wh, "d", "held")
    assert StreamStore().load_state("d", "held").consumed_batch is None  # progress did not move
    sql(wh, "INSERT INTO tb1 VALUES ('2025-01-01 00:02:00', 3)")
    rec.start()
    report = run_stream(wh, "d", "held")
    assert report.delivery.dropped_events == 0
    events = received(rec)
    assert [e["result"]["s"] for e in events] == [1, 2, 3]  # in order, none lost, none twice
    assert len({e["triggerId"] for e in events}) == 3
    box = outbox_of(StreamStore().get("d", "held"))
    assert box.stats()["pending"] == 0 and list(box.directory.glob("0*.json")) == []  # pruned on commit


def test_session_and_sliding_streams(wh, receivers):
    rec = receivers()
    sql(wh, "CREATE TABLE tb1 (ts TIMESTAMP, col1 INT)")
    sql(wh, f"""CREATE STREAM sess SESSION(ts, 2m) FROM tb1 NOTIFY('{rec.url}') ON (WINDOW_CLOSE)
               INTO sess_out AS SELECT _twstart, count(*) n FROM %%trows""")
    sql(wh, f"""CREATE STREAM sl SLIDING(1m) FROM tb1 NOTIFY('{rec.url}') INTO sl_out AS
               SELECT _tcurrent_ts, count(*) n FROM %%trows""")
    sql(wh, """INSERT INTO tb1 VALUES ('2025-01-01 00:00:30', 1) ('2025-01-01 00:01:10', 2)
               ('2025-01-01 00:05:00', 3) ('2025-01-01 00:06:00', 4) ('2025-01-01 00:20:00', 5)""")
    run_stream(wh, "d", "sess")
    sessions = received(rec)
    # gaps of more than 2 minutes split [00:00:30, 00:01:10], [00:05, 00:06]; 00:20 stays open
    assert [(brief(e), e["result"]["n"], e["triggerType"]) for e in sessions] == [
        (("WINDOW_CLOSE", MS0 + 30_000, MS0 + 70_000), 2, "Session"),
        (("WINDOW_CLOSE", MS0 + 5 * MIN, MS0 + 6 * MIN), 2, "Session")]
    run_stream(wh, "d", "sl")
    ticks = received(rec)[len(sessions):]
    # event time reached 00:20: instants 00:01 .. 00:20, each counting the rows of [previous, current)
    assert [e["eventTime"] for e in ticks] == [MS0 + k * MIN for k in range(1, 21)]
    assert {e["eventType"] for e in ticks} == {"ON_TIME"} and {e["triggerType"] for e in ticks} == {"Sliding"}
    counts = {(e["eventTime"] - MS0) // MIN: e["result"]["n"] for e in ticks}
    assert counts[1] == 1 and counts[2] == 1 and counts[6] == 1 and counts[7] == 1 and sum(counts.values()) == 4


def test_a_legacy_stream_notifies_in_the_3_3_6_format(wh, receivers):
    """A stream in TDengine's syntax before 3.3.7 sends the messages of reference 003: ``windowId``
    and ``windowType`` (``Time`` for INTERVAL), no ``groupId``; closes carry the result."""
    rec = receivers()
    sql(wh, f"""CREATE TABLE m (ts TIMESTAMP, v INT);
                CREATE STREAM s INTO o AS SELECT _wstart, count(*) c, sum(v) total FROM m INTERVAL(1m)
                  NOTIFY ('{rec.url}') ON ('WINDOW_OPEN', 'WINDOW_CLOSE') ON_FAILURE DROP""")
    sql(wh, f"INSERT INTO m VALUES ({MS0}, 1) ({MS0 + 10_000}, 2) ({MS0 + MIN + 5_000}, 4)")
    run_stream(wh, "d", "s")
    messages = rec.messages()
    for msg in messages:
        validate(msg, "3.3.6")
    events = events_of(messages)
    # by hand: [T0, T0+1m) opens and closes (2 rows, 3); [T0+1m, ...) opens
    assert [(e["eventType"], e["windowType"], e["windowStart"]) for e in events] == [
        ("WINDOW_OPEN", "Time", MS0), ("WINDOW_CLOSE", "Time", MS0), ("WINDOW_OPEN", "Time", MS0 + MIN)]
    close = events[1]
    assert close["windowEnd"] == MS0 + MIN and close["result"]["c"] == 2 and close["result"]["total"] == 3
    assert all("groupId" not in e and "triggerId" not in e and e["windowId"] for e in events)
    assert close["windowId"] == events[0]["windowId"]


def test_a_late_commit_of_older_sliding_marks_does_not_send_their_instants_again(wh, receivers):
    """The SLIDING marks of a stale task attempt, committed after the retry's, leave each group's
    later mark in place: the next run fires only the instants after it."""
    rec = receivers()
    sql(wh, "CREATE TABLE tb1 (ts TIMESTAMP, col1 INT)")
    sql(wh, f"""CREATE STREAM sl SLIDING(1m) FROM tb1 NOTIFY('{rec.url}') INTO sl_out AS
               SELECT _tcurrent_ts, count(*) n FROM %%trows""")
    sql(wh, "INSERT INTO tb1 VALUES ('2025-01-01 00:00:30', 1) ('2025-01-01 00:02:00', 2)")
    stale = run_stream(wh, "d", "sl", RunRequest(commit=False))  # instants 00:01 and 00:02
    sql(wh, "INSERT INTO tb1 VALUES ('2025-01-01 00:04:00', 3)")
    retry = run_stream(wh, "d", "sl", RunRequest(commit=False))  # 00:01 to 00:04
    notifications.deliver_outbox(StreamStore().get("d", "sl"))
    commit_progress("d", "sl", retry.progress)
    commit_progress("d", "sl", stale.progress)  # the stale attempt's progress lands last
    sql(wh, "INSERT INTO tb1 VALUES ('2025-01-01 00:05:00', 4)")
    run_stream(wh, "d", "sl")  # 00:05 only
    # event time reached 00:05: each instant 00:01 .. 00:05 notified once
    assert [e["eventTime"] for e in received(rec)] == [MS0 + k * MIN for k in range(1, 6)]


def test_sub_event_windows_notify_window_index_and_keep_the_parent_s_result(wh, receivers):
    # TDengine 3.4.0's sub-event windows (its test_event_new.py, s9_1) on our rows: level 0 is
    # amps >= 90, level 1 amps >= 60, one row a minute
    rec = receivers()
    sql(wh, "CREATE TABLE amp (ts TIMESTAMP, amps INT)")
    sql(wh, f"""CREATE STREAM lv EVENT_WINDOW(START WITH (amps >= 90, amps >= 60)) FROM amp
               NOTIFY('{rec.url}') ON (WINDOW_OPEN|WINDOW_CLOSE) INTO lv_out AS
               SELECT _twstart, count(*) AS n, max(amps) AS top FROM %%trows""")
    values = [40, 65, 70, 95, 92, 61, 30, 91, 20]
    sql(wh, "INSERT INTO amp VALUES " + " ".join(
        f"('2025-01-01 00:0{i}:00', {v})" for i, v in enumerate(values)))
    run_stream(wh, "d", "lv")
    events = received(rec)
    shape = sorted((e["windowStart"], e["windowIndex"], e["eventType"], e["triggerCondition"]["conditionIndex"])
                   for e in events)
    # 01-02 level 1, 03-04 level 0, 05 level 1, 06 none: sub-windows 0, 1, 2 in the parent [01, 06]
    # (-1); 07-08 keeps level 0: a plain window (-1). A change closes a sub-window with the new
    # level's index; a row where no level holds, with the level that stopped holding.
    assert shape == [
        (MS0 + MIN, -1, "WINDOW_CLOSE", 1), (MS0 + MIN, -1, "WINDOW_OPEN", 1),
        (MS0 + MIN, 0, "WINDOW_CLOSE", 0), (MS0 + MIN, 0, "WINDOW_OPEN", 1),
        (MS0 + 3 * MIN, 1, "WINDOW_CLOSE", 1), (MS0 + 3 * MIN, 1, "WINDOW_OPEN", 0),
        (MS0 + 5 * MIN, 2, "WINDOW_CLOSE", 1), (MS0 + 5 * MIN, 2, "WINDOW_OPEN", 1),
        (MS0 + 7 * MIN, -1, "WINDOW_CLOSE", 0), (MS0 + 7 * MIN, -1, "WINDOW_OPEN", 0),
    ]
    closes = {(e["windowStart"], e["windowIndex"]): (e["windowEnd"], e["result"]["n"]) for e in events
              if e["eventType"] == "WINDOW_CLOSE"}
    assert closes == {(MS0 + MIN, 0): (MS0 + 2 * MIN, 2), (MS0 + MIN, -1): (MS0 + 6 * MIN, 6),
                      (MS0 + 3 * MIN, 1): (MS0 + 4 * MIN, 2), (MS0 + 5 * MIN, 2): (MS0 + 6 * MIN, 2),
                      (MS0 + 7 * MIN, -1): (MS0 + 8 * MIN, 2)}
    # the output keeps a row per window start: at 01 the parent's, which closes after its first
    # sub-window (as TDengine's s9_1 keeps it)
    rows = select(wh, "SELECT * FROM lv_out ORDER BY 1")
    assert [(r["n"], r["top"]) for r in rows] == [(6, 95), (2, 95), (2, 61), (2, 91)]


def test_calendar_month_windows_of_a_zone_notify_and_compute_their_bounds(wh, receivers):
    rec = receivers()
    sql(wh, METERS)
    sql(wh, f"""CREATE STREAM monthly INTERVAL(1n) SLIDING(1n) FROM t1 TIMEZONE 'Europe/Berlin'
               NOTIFY('{rec.url}') ON (WINDOW_CLOSE)
               INTO m_out AS SELECT _twstart ts, _twend te, count(*) n FROM %%trows""")
    # Berlin's February 2024 (CET, +01:00) is [2024-01-31 23:00 UTC, 2024-02-29 23:00 UTC): 29 days
    feb, mar = datetime(2024, 1, 31, 23, tzinfo=UTC), datetime(2024, 2, 29, 23, tzinfo=UTC)
    ms = lambda at: int(at.timestamp() * 1000)  # noqa: E731
    sql(wh, "INSERT INTO t1 VALUES ('2024-02-01 00:30:00+01:00', 1) ('2024-02-29 23:30:00+01:00', 2) "
            "('2024-03-01 00:00:00+01:00', 3)")
    run_stream(wh, "d", "monthly")
    assert [brief(e) for e in received(rec)] == [("WINDOW_CLOSE", ms(feb), ms(mar))]
    out = select(wh, "SELECT * FROM m_out")
    assert [(r["ts"], r["te"], r["n"]) for r in out] == [(feb, mar, 2)]
    # a late row on the leap day recalculates February: invalidated, then closed again with 3 rows
    sql(wh, "INSERT INTO t1 VALUES ('2024-02-29 12:00:00+01:00', 4)")
    run_stream(wh, "d", "monthly")
    later = [brief(e) for e in received(rec)[1:]]
    assert later == [("WINDOW_INVALIDATION", ms(feb), ms(mar)), ("WINDOW_CLOSE", ms(feb), ms(mar))]
    assert [(r["ts"], r["n"]) for r in select(wh, "SELECT * FROM m_out")] == [(feb, 3)]
