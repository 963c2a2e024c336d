"""VERIFY STREAM end to end, one table-driven case per trigger type.

Each stream runs live twice, the second time after late rows, an update and a delete (where its
trigger recalculates them), and must then verify clean. Then its output is altered by hand (a row
deleted, a value changed, a row added): VERIFY must report exactly those three rows, with the
values the test put there or took away, and REPAIR must put back the output as it was and verify
clean. The oracle for "exactly": what the test did to the output; for "clean": one window worked
out by hand from the rows.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import pytest
from airflow.sdk.exceptions import AirflowException

from airflow_stream_provider.cli.commands import main
from airflow_stream_provider.operators.verify import StreamVerifyOperator
from airflow_stream_provider.streams.run import run as run_stream
from airflow_stream_provider.streams.run_request import RunRequest
from airflow_stream_provider.streams.verify import verify
from tests.conftest import sql

pytestmark = pytest.mark.spark

T0 = datetime(2025, 1, 1, tzinfo=UTC)
SCHEMA = """
CREATE DATABASE d; USE d;
CREATE STABLE m (ts TIMESTAMP, col1 INT, st INT) TAGS (loc VARCHAR(20));
CREATE TABLE t1 USING m TAGS ('a');
CREATE TABLE t2 USING m TAGS ('b');
"""
# (minute, col1, st): st ends an event window at 2, and splits state windows where it changes
T1 = [(0, 1, 1), (1, 3, 1), (2, 5, 2), (6, 10, 1), (7, 20, 2), (12, 7, 1), (13, 9, 2), (20, 4, 1)]
T2 = [(0, 2, 1), (3, 4, 2), (8, 6, 1), (9, 8, 2), (21, 1, 1)]
LATER = [(26, 2, 2), (33, 5, 1), (40, 6, 2)]  # in order, closing the windows the first rows left open
ITEMS = "avg(col1), max(col1), count(*)"
WINDOW = f"SELECT _twstart, {ITEMS} FROM %%tbname WHERE _c0 >= _twstart AND _c0 {{op}} _twend"


@dataclass(frozen=True)
class Case:
    create: str  # the CREATE STREAM text, the stream called s
    changes: bool = True  # the trigger recalculates late rows, updates and deletes
    period: bool = False


OPTIONS = "STREAM_OPTIONS(DELETE_RECALC)"
CASES = {
    "interval": Case(f"CREATE STREAM s INTERVAL(5m) SLIDING(5m) FROM m PARTITION BY tbname {OPTIONS} INTO s_out AS "
                     + WINDOW.format(op="<")),
    "session": Case(f"CREATE STREAM s SESSION(ts, 3m) FROM m PARTITION BY tbname {OPTIONS} INTO s_out AS "
                    + WINDOW.format(op="<=")),
    "state": Case(f"CREATE STREAM s STATE_WINDOW(st) FROM m PARTITION BY tbname {OPTIONS} INTO s_out AS "
                  + WINDOW.format(op="<=")),
    "event": Case("CREATE STREAM s EVENT_WINDOW(START WITH st = 1 END WITH st = 2) FROM m PARTITION BY tbname "
                  f"{OPTIONS} INTO s_out AS " + WINDOW.format(op="<=")),
    # COUNT_WINDOW does not recalculate: its rows come in order
    "count": Case("CREATE STREAM s COUNT_WINDOW(3) FROM m PARTITION BY tbname INTO s_out AS "
                  + WINDOW.format(op="<="), changes=False),
    # a SLIDING instant, once fired, is not computed again: its rows come in order
    "sliding": Case("CREATE STREAM s SLIDING(5m) FROM m PARTITION BY tbname INTO s_out AS SELECT _tcurrent_ts, "
                    f"{ITEMS} FROM %%tbname WHERE _c0 >= _tprev_ts AND _c0 < _tcurrent_ts", changes=False),
    # each instant's %%trows is what was written between its version and the previous instant's
    "period": Case(f"CREATE STREAM s PERIOD(2s) FROM m PARTITION BY tbname INTO s_out AS SELECT "
                   f"cast(_tlocaltime/1000000 AS TIMESTAMP) ts, {ITEMS} FROM %%trows", period=True),
    "legacy": Case(f"CREATE STREAM s TRIGGER WINDOW_CLOSE IGNORE EXPIRED 0 INTO s_out AS SELECT _wstart, {ITEMS} "
                   "FROM m PARTITION BY tbname INTERVAL(5m)"),
}


def stamp(minute: float) -> str:
    return (T0 + timedelta(minutes=minute)).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]


def insert(wh, table: str, rows) -> None:
    sql(wh, f"INSERT INTO {table} VALUES " + " ".join(f"('{stamp(t)}', {v}, {s})" for t, v, s in rows))


def output(wh) -> dict[tuple, tuple]:
    """(output subtable, timestamp) -> the row's value columns."""
    table = sql(wh, "SELECT tbname, * FROM s_out")[-1].table
    first = table.column_names[1]
    return {(r["tbname"], r[first]): tuple(v for k, v in r.items() if k not in ("tbname", first))
            for r in table.to_pylist()}


def columns(wh) -> list[str]:
    return sql(wh, "SELECT * FROM s_out")[-1].table.column_names


def run(wh, case: Case) -> None:
    if not case.period:
        run_stream(wh, "d", "s")
        return
    # PERIOD instants are wall-clock times, and each reads the table at its own version (the last
    # commit before it): the test's writes must come before the instants that read them
    wall = datetime.now(UTC)
    time.sleep(2 - (wall.timestamp() % 2) + 0.3)  # past the next instant
    run_stream(wh, "d", "s", RunRequest(now=datetime.now(UTC)))


@pytest.fixture
def wh(wh):
    sql(wh, SCHEMA)
    return wh


def cli(capsys, *args: str) -> tuple[int, str, str]:
    """``airflow-stream ARGS`` in this process, on the suite's Spark session: (status, stdout, stderr)."""
    capsys.readouterr()
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def streams_page(monkeypatch):
    """The Streams page's app for a user who may read stream d.s's DAG and run nothing (Airflow's
    auth manager replaced by that rule, as tests/test_ui_access.py does)."""
    from fastapi import HTTPException
    from fastapi.testclient import TestClient

    from airflow_stream_provider.ui import app as ui

    def authorize(user, dag_id, method, run=False):
        if run or dag_id != "stream__d__s":
            raise HTTPException(403, f"may not {'run' if run else 'read'} {dag_id}")

    monkeypatch.setattr(ui, "_authorize", authorize)
    app = ui.create_app()
    app.dependency_overrides[ui.current_user] = lambda: object()
    return TestClient(app)


@pytest.mark.parametrize("kind", sorted(CASES))
def test_verify_is_clean_then_reports_and_repairs_what_was_altered(wh, kind, capsys, monkeypatch):
    case = CASES[kind]
    sql(wh, case.create)
    insert(wh, "t1", T1)
    insert(wh, "t2", T2)
    run(wh, case)
    if case.changes:
        insert(wh, "t1", [(1.5, 11, 1)])  # late, into a window already closed
        insert(wh, "t1", [(6, 50, 1)])  # an update: the same timestamp of the same subtable
        # a delete inside a window (not its first row): a delete that takes a window's first row away
        # leaves that window's result in place (3.3.7's DELETE_RECALC), which VERIFY reports as extra
        sql(wh, f"DELETE FROM t1 WHERE ts = '{stamp(1)}'")
    insert(wh, "t1", LATER)
    insert(wh, "t2", LATER)
    run(wh, case)

    clean = verify(wh, "d", "s")
    assert clean.equal, clean.differences
    assert clean.triggers > 0 and clean.rows == clean.compared == len(output(wh))
    before = output(wh)
    if kind == "interval":  # [00:00, 00:05) of t1 after the late row and the delete: 1, 11, 5 (by hand)
        ((table, _),) = [k for k in before if k[1] == T0 and before[k][-1] == "t1"]
        assert before[(table, T0)][:3] == (pytest.approx(17 / 3), 11, 3)
        code, out, _ = cli(capsys, "verify", "d.s", "--format", "json")
        assert code == 0 and json.loads(out)["equal"] is True
        code, _, err = cli(capsys, "verify", "d.nope")
        assert code == 2 and "nope" in err
        code, _, err = cli(capsys, "verify", "d.s", "--from", "2025-13-01")
        assert code == 2 and "2025-13-01" in err
        assert StreamVerifyOperator(task_id="verify", stream="d.s").execute({})["equal"] is True
        page = streams_page(monkeypatch)
        answer = page.post("/api/streams/d/s/verify", json={})
        assert answer.status_code == 200 and answer.json()["equal"] is True
        refused = page.post("/api/streams/d/s/verify", json={"repair": True})  # reading is not recalculating
        assert refused.status_code == 403

    # alter the output by hand
    keys = sorted(before, key=lambda k: (k[1], k[0]))
    # the first row goes; the last with rows (an empty window or instant has a NULL average) changes
    (gone_table, gone_at) = keys[0]
    (changed_table, changed_at) = [k for k in keys if before[k][0] is not None][-1]
    extra_at = T0 + timedelta(hours=9, seconds=1)  # no trigger gives a row here
    sql(wh, f"DELETE FROM {gone_table} WHERE _c0 = '{gone_at.strftime('%Y-%m-%d %H:%M:%S.%f')}'")
    changed = before[(changed_table, changed_at)]
    sql(wh, f"INSERT INTO {changed_table} VALUES ('{changed_at.strftime('%Y-%m-%d %H:%M:%S.%f')}', "
            f"{changed[0]}, 999, {changed[2]})")
    sql(wh, f"INSERT INTO {changed_table} VALUES ('{extra_at.strftime('%Y-%m-%d %H:%M:%S')}', 1.5, 7, 1)")

    found = verify(wh, "d", "s")
    seen = {(d.status, d.table, d.ts): (d.columns, d.old, d.new) for d in found.differences}
    assert set(seen) == {("missing", gone_table, gone_at), ("different", changed_table, changed_at),
                         ("extra", changed_table, extra_at)}
    assert seen[("missing", gone_table, gone_at)][1:] == (None, before[(gone_table, gone_at)])
    assert seen[("different", changed_table, changed_at)] == ((columns(wh)[2],), (999,), (changed[1],))
    assert seen[("extra", changed_table, extra_at)][1:] == ((1.5, 7, 1, *changed[3:]), None)
    assert all(d.trigger_id for d in found.differences if d.status != "extra")
    if kind == "interval":
        code, out, _ = cli(capsys, "verify", "d.s")
        assert code == 3 and "3 differences (1 missing, 1 extra, 1 different)" in out
        assert sorted(line.split()[0] for line in out.splitlines()[2:5]) == ["different", "extra", "missing"]
        with pytest.raises(AirflowException, match="3 differences"):  # the periodic verification's task fails
            StreamVerifyOperator(task_id="verify", stream="d.s").execute({})

    repaired = verify(wh, "d", "s", repair=True)
    assert repaired.equal and repaired.repaired is not None and len(repaired.repaired) == 3
    assert repaired.removed == 1
    assert output(wh) == before



def test_verify_reads_the_version_the_consumed_batches_read_when_the_node_detects(wh):
    """The stream node's detector records no ``detected_version`` in the stream's state: its runs
    only consume batches (``consumed_batch``), and a version recorded by an earlier run that detected
    itself stays behind. VERIFY judges the windows those batches found, not none or older ones."""
    from airflow_stream_provider.streams.store import StreamStore

    case = CASES["interval"]
    sql(wh, case.create)
    insert(wh, "t1", T1 + LATER)
    insert(wh, "t2", T2 + LATER)
    run(wh, case)
    store = StreamStore()
    state = store.load_state("d", "s")
    assert state.consumed_batch is not None and state.detected_version is not None
    for recorded in (None, 0):  # none (the node's runs), or one from before (a run that detected once)
        store.save_state("d", "s", state.replace(detected_version=recorded))
        report = verify(wh, "d", "s")
        assert report.equal, report.differences
        # (the version the run that detected recorded itself: what its batches read up to)
        assert report.version == state.detected_version
        assert report.triggers > 0 and report.rows == report.compared == len(output(wh)) > 0
