"""Notifications of a ROLLUP BY stream (TDengine 3.4.2): one event per rollup group's window.

Subtables at ``A.B`` and ``A.C`` make the groups ``A``, ``A.B`` and ``A.C``; each group's window closes
with its own event, carrying its output subtable (``tableName``), its group id and its result, worked
out by hand from the rows.
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from airflow_stream_provider.notify.message import validate
from airflow_stream_provider.streams.run import run as run_stream
from tests.conftest import sql
from tests.notify.conftest import events_of, notify_database

pytestmark = pytest.mark.spark

MS0 = int(datetime(2025, 1, 1, tzinfo=UTC).timestamp() * 1000)
MIN = 60_000


@pytest.fixture
def wh(wh, monkeypatch):
    yield from notify_database(wh, monkeypatch)


def test_each_rollup_group_notifies_its_window(wh, receivers):
    rec = receivers()
    sql(wh, """CREATE STABLE stb1 (ts TIMESTAMP, col1 INT) TAGS (loc VARCHAR(20));
               CREATE TABLE t1 USING stb1 TAGS ('A.B'); CREATE TABLE t2 USING stb1 TAGS ('A.C')""")
    sql(wh, f"""CREATE STREAM roll INTERVAL(5m) SLIDING(5m) FROM stb1 ROLLUP BY loc
               NOTIFY('{rec.url}') ON (WINDOW_CLOSE)
               INTO r OUTPUT_SUBTABLE(concat('n_', %%rollup_tag)) AS SELECT _twstart, sum(col1) s FROM %%trows""")
    sql(wh, """INSERT INTO t1 VALUES ('2025-01-01 00:00:00', 1) ('2025-01-01 00:06:00', 10);
               INSERT INTO t2 VALUES ('2025-01-01 00:02:00', 7) ('2025-01-01 00:07:00', 1)""")
    report = run_stream(wh, "d", "roll")
    msgs = rec.messages()
    for msg in msgs:
        validate(msg)
    events = events_of(msgs)
    # [0, 5) closed in each group (the rows at 6 and 7 minutes passed it): A = 1 + 7, A.B = 1, A.C = 7
    got = {e["tableName"]: (e["eventType"], e["windowStart"], e["windowEnd"], e["result"]["s"]) for e in events}
    assert got == {"n_a": ("WINDOW_CLOSE", MS0, MS0 + 5 * MIN, 8), "n_b": ("WINDOW_CLOSE", MS0, MS0 + 5 * MIN, 1),
                   "n_c": ("WINDOW_CLOSE", MS0, MS0 + 5 * MIN, 7)}
    assert len({e["groupId"] for e in events}) == 3 and report.notified == 3
