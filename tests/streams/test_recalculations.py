"""information_schema.ins_stream_recalculates: the states, the progress and the keeping of a
stream's recalculation requests (TDengine 3.4.2.5), from the home's files alone."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from airflow_stream_provider.sql import parse
from airflow_stream_provider.streams import recalculations as rc
from airflow_stream_provider.streams.store import StoredStream

TEXT = "CREATE STREAM s INTERVAL(1m) SLIDING(1m) FROM m INTO o AS SELECT _twstart ts, count(*) n FROM %%trows"
T0 = datetime(2025, 1, 1, tzinfo=UTC)


@pytest.fixture
def stored(tmp_path):
    (stmt,) = parse(TEXT)
    return StoredStream("d", "s", TEXT, stmt, tmp_path / "state", tmp_path / "state")


def test_a_request_of_three_slices_goes_pending_running_finished(stored):
    made = rc.request(stored, rc.REQUESTED, T0, T0 + timedelta(hours=3), slices=3, now=T0)
    assert (made.status, made.progress) == ("Pending", "0%")
    rc.started(stored, made.recalc_id, now=T0)
    first = rc.part_done(stored, made.recalc_id, T0, now=T0)
    assert (first.status, first.progress) == ("Running", "33%")  # 1 of 3 slices: 100 // 3
    again = rc.part_done(stored, made.recalc_id, T0, now=T0)  # the same slice run again counts once
    assert again.progress == "33%"
    rc.part_done(stored, made.recalc_id, T0 + timedelta(hours=1), now=T0)
    last = rc.part_done(stored, made.recalc_id, T0 + timedelta(hours=2), now=T0)
    assert (last.status, last.progress, last.ended) == ("Finished", "100%", T0)


def test_a_failure_is_retried_until_the_last_try_then_failed_with_its_message(stored):
    made = rc.request(stored, rc.REQUESTED, T0, T0 + timedelta(hours=2), slices=2, now=T0)
    retried = rc.failed(stored, made.recalc_id, "OSError: disk full", final=False, now=T0)
    assert (retried.status, retried.message) == ("Running", "retried after: OSError: disk full")
    gone = rc.failed(stored, made.recalc_id, "OSError: disk full", now=T0)
    assert (gone.status, gone.message, gone.progress) == ("Failed", "OSError: disk full", "0%")
    assert rc.part_done(stored, made.recalc_id, T0, now=T0).status == "Failed"  # an ended request stays so


def test_requests_survive_a_restart_and_ended_ones_are_kept_an_hour(stored):
    open_one = rc.request(stored, rc.REQUESTED, T0, T0 + timedelta(hours=1), now=T0)
    done = rc.finished(stored, rc.LATE_ROWS, T0, T0 + timedelta(minutes=1), now=T0 + timedelta(minutes=5))
    (again_stmt,) = parse(TEXT)  # another process reading the same home
    reread = StoredStream("d", "s", TEXT, again_stmt, stored.state_dir, stored.data_dir)
    assert [r.recalc_id for r in rc.records(reread, T0 + timedelta(minutes=10))] == [open_one.recalc_id,
                                                                                       done.recalc_id]
    # an hour after it ended the finished one is gone; the pending one stays, however old
    later = T0 + timedelta(minutes=65)
    assert [r.recalc_id for r in rc.records(reread, later)] == [open_one.recalc_id]


def test_a_stream_keeps_its_latest_100_ended_requests(stored):
    for i in range(105):
        rc.finished(stored, rc.LATE_ROWS, T0, T0 + timedelta(minutes=1), now=T0 + timedelta(seconds=i))
    pending = rc.request(stored, rc.REQUESTED, T0, T0 + timedelta(hours=1), now=T0 + timedelta(seconds=200))
    kept = rc.records(stored, T0 + timedelta(seconds=200))
    ended = [r for r in kept if r.status == "Finished"]
    assert len(ended) == 100 and pending.recalc_id in {r.recalc_id for r in kept}
    assert min(r.ended for r in ended) == T0 + timedelta(seconds=5)  # the 5 oldest of 105 went


def test_a_backfill_runs_one_slice_per_step_that_begins_in_the_range():
    # slices of 1 h from local midnight: [00:30, 03:00) holds the starts 01:00 and 02:00
    assert rc.backfill_slices(timedelta(hours=1), UTC, T0 + timedelta(minutes=30), T0 + timedelta(hours=3)) == 2
    # [00:00, 03:00): 00:00, 01:00, 02:00 (TO is left out)
    assert rc.backfill_slices(timedelta(hours=1), UTC, T0, T0 + timedelta(hours=3)) == 3
    assert rc.backfill_slices(timedelta(days=1), UTC, T0 + timedelta(hours=1), T0 + timedelta(hours=2)) == 0


def test_a_backfill_run_is_a_part_of_the_request_whose_range_holds_its_slice(stored):
    made = rc.request(stored, rc.REQUESTED, T0, T0 + timedelta(hours=2), slices=2, now=T0)
    assert rc.covering(stored, T0 + timedelta(hours=1)).recalc_id == made.recalc_id
    assert rc.covering(stored, T0 + timedelta(hours=2)) is None  # TO is outside


def test_the_view_lists_tdengine_columns():
    names = [name for name, _ in rc.COLUMNS]
    assert names[:2] == ["stream_name", "db_name"]
    assert {"recalc_id", "start", "end", "progress", "status", "request_time", "message"} <= set(names)
