"""VERIFY CQ end to end: a continuous query with overlapping ranges verifies clean after late rows,
an update and a delete that later executions read; its target series altered by hand (a point
deleted, a value changed, a point added) is reported exactly, and REPAIR puts it back.

The oracle: each 1 s bucket's maximum worked out by hand from the points the test writes (value
``i + 1`` at ``S + 500 ms * i``), and what the test did to the target series.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from airflow_stream_provider.streams.run import run
from airflow_stream_provider.streams.run_request import RunRequest
from airflow_stream_provider.streams.store import StreamStore
from airflow_stream_provider.streams.verify import verify
from tests.conftest import sql

pytestmark = pytest.mark.spark

T = datetime(2024, 6, 1, 12, 0, 10, tzinfo=UTC)  # the BOUNDARY: the first execution
S = T - timedelta(seconds=3)
TARGET = "root.sg.d1.s1_max"


def ms(at: datetime) -> int:
    return int(at.timestamp() * 1000)


def sec(n: float) -> datetime:
    return T + timedelta(seconds=n)


def target(wh) -> dict[datetime, int]:
    (result,) = sql(wh, "SELECT s1_max FROM root.sg.d1")
    rows = [tuple(r.values()) for r in result.table.to_pylist()]
    return {at.astimezone(UTC): value for at, value in rows if value is not None}


def test_verify_cq_is_clean_then_reports_and_repairs_what_was_altered(wh):
    sql(wh, "CREATE TIMESERIES root.sg.d1.s1 WITH DATATYPE=INT64")
    sql(wh, "CREATE TIMESERIES root.sg.d1.s1_max WITH DATATYPE=INT64")
    rows = ", ".join(f"({ms(S + timedelta(milliseconds=500 * i))}, {i + 1})" for i in range(10))
    sql(wh, f"INSERT INTO root.sg.d1(time, s1) VALUES {rows}")
    sql(wh, f"CREATE CQ vcq RESAMPLE EVERY 1s BOUNDARY {ms(T)} RANGE 2s BEGIN SELECT max_value(s1) "
            "INTO root.sg.d1(s1_max) FROM root.sg.d1 GROUP BY(1s) END")
    store = StreamStore()
    store.save_state("root", "vcq", store.load_state("root", "vcq").replace(created=T - timedelta(seconds=10)))
    run(wh, "root", "vcq", RunRequest(now=sec(2)))  # T, T+1, T+2: ranges [T-2, T), [T-1, T+1), [T, T+2)
    # into [T+1, T+2), which the executions at T+3 read again: late, an update, a delete; and new points
    sql(wh, f"INSERT INTO root.sg.d1(time, s1) VALUES ({ms(sec(1.2))}, 50), ({ms(sec(1.5))}, 100), "
            f"({ms(sec(2.5))}, 11), ({ms(sec(3.5))}, 12)")
    sql(wh, f"DELETE FROM root.sg.d1.s1 WHERE time = {ms(sec(1))}")
    run(wh, "root", "vcq", RunRequest(now=sec(4)))  # T+3, T+4

    clean = verify(wh, "root", "vcq")
    assert clean.equal, clean.differences
    assert clean.triggers == 5
    before = target(wh)
    # by hand: [T-2, T-1) holds 3 and 4, [T-1, T) 5 and 6, [T, T+1) 7 and 8, [T+1, T+2) 50 and 100
    # (9 deleted, 10 updated), [T+2, T+3) 11, [T+3, T+4) 12
    assert before == {sec(-2): 4, sec(-1): 6, sec(0): 8, sec(1): 100, sec(2): 11, sec(3): 12}

    sql(wh, f"DELETE FROM root.sg.d1.s1_max WHERE time = {ms(sec(-1))}")
    sql(wh, f"INSERT INTO root.sg.d1(time, s1_max) VALUES ({ms(sec(0))}, 999), ({ms(sec(0.5))}, 7)")
    found = verify(wh, "root", "vcq")
    seen = {(d.status, d.ts): (d.table, d.old, d.new) for d in found.differences}
    assert seen == {("missing", sec(-1)): (TARGET, None, (6,)),
                    ("different", sec(0)): (TARGET, (999,), (8,)),
                    ("extra", sec(0.5)): (TARGET, (7,), None)}

    repaired = verify(wh, "root", "vcq", repair=True)
    assert repaired.equal and repaired.repaired is not None and len(repaired.repaired) == 3
    assert target(wh) == before
