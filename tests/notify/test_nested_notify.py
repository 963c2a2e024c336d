"""Notifications of nested windows (TDengine 3.4.2): a leaf window's events in TDengine's JSON, its
``triggerType`` the leaf's, one trigger id per leaf window and outer window (leaves that start
together in different outer windows are different windows). TDengine's scenarios of
test_nested_window_notify.py with our own rows; the expected events are worked out by hand."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from airflow_stream_provider.notify.message import validate
from airflow_stream_provider.streams.run import run as run_stream
from tests.conftest import sql
from tests.notify.conftest import events_of, notify_database

pytestmark = pytest.mark.spark

MS0 = int(datetime(2025, 8, 16, 0, 20, tzinfo=UTC).timestamp() * 1000)
S = 1000


@pytest.fixture
def wh(wh, monkeypatch):
    yield from notify_database(wh, monkeypatch, "CREATE TABLE src (ts TIMESTAMP, parent VARCHAR(8), v INT)")


def received(rec) -> list[dict]:
    msgs = rec.messages()
    for msg in msgs:
        validate(msg)
    return events_of(msgs)


def test_leaves_of_one_interval_in_three_outer_windows_are_three_windows(wh, receivers):
    rec = receivers()
    sql(wh, f"""CREATE STREAM s_lineage WINDOW(STATE_WINDOW(parent) EXTEND(1) AS w_parent,
                    INTERVAL(10s) SLIDING(10s) AS w_leaf) FROM src
                STREAM_OPTIONS(EVENT_TYPE(WINDOW_CLOSE) | FLUSH_ON_OUTER_CLOSE)
                NOTIFY('{rec.url}') ON (WINDOW_CLOSE) INTO r_lineage AS
                SELECT w_leaf._twstart AS leaf_start, w_parent._twstart AS parent_start, count(*) AS members,
                       sum(v) AS total FROM %%trows""")
    sql(wh, "INSERT INTO src VALUES ('2025-08-16 00:20:00', 'A', 10) ('2025-08-16 00:20:01', 'A', 20) "
            "('2025-08-16 00:20:02', 'B', 100) ('2025-08-16 00:20:03', 'A', 1000) ('2025-08-16 00:20:04', 'A', 2000) "
            "('2025-08-16 00:20:05', 'C', 10000)")
    run_stream(wh, "d", "s_lineage")
    events = received(rec)
    # parent A (0-1 s), B (2 s) and A again (3-4 s) each close when the next begins; each holds a piece of
    # the interval [00:20:00, 00:20:10), which closes with it (FLUSH_ON_OUTER_CLOSE); C (5 s) is open
    assert [(e["eventType"], e["triggerType"], e["windowStart"], e["windowEnd"]) for e in events] == [
        ("WINDOW_CLOSE", "Interval", MS0, MS0 + 10 * S)] * 3
    assert sorted((e["result"]["parent_start"], e["result"]["members"], e["result"]["total"]) for e in events) == [
        (MS0, 2, 30), (MS0 + 2 * S, 1, 100), (MS0 + 3 * S, 2, 3000)]
    assert {e["result"]["leaf_start"] for e in events} == {MS0}
    assert len({e["triggerId"] for e in events}) == 3
    assert {e["tableName"] for e in events} == {"r_lineage"}


def test_a_leaf_opens_and_closes_with_one_trigger_id(wh, receivers):
    rec = receivers()
    sql(wh, f"""CREATE STREAM s_pair WINDOW(STATE_WINDOW(parent) EXTEND(1) AS w_parent, COUNT_WINDOW(2, 2) AS w_leaf)
                FROM src
                NOTIFY('{rec.url}') ON (WINDOW_OPEN | WINDOW_CLOSE) INTO r_pair AS
                SELECT w_leaf._twstart AS leaf_start, w_parent._twstart AS parent_start, count(*) AS members
                FROM %%trows""")
    sql(wh, "INSERT INTO src VALUES ('2025-08-16 00:20:00', 'A', 10)")
    run_stream(wh, "d", "s_pair")
    sql(wh, "INSERT INTO src VALUES ('2025-08-16 00:20:01', 'A', 20)")
    run_stream(wh, "d", "s_pair")
    events = received(rec)
    # the pair opens at the first row (one batch) and closes at the second (the next batch)
    assert [(e["eventType"], e["triggerType"], e["windowStart"]) for e in events] == [
        ("WINDOW_OPEN", "Count", MS0), ("WINDOW_CLOSE", "Count", MS0)]
    assert events[0]["triggerId"] == events[1]["triggerId"]
    assert events[1]["windowEnd"] == MS0 + S and events[1]["result"]["members"] == 2
