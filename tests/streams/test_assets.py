"""A stream's asset ledger without Airflow: the windows of fired triggers, the events of an entry
(one per batch, one per window with its partition key), ids that make a repeated commit append
nothing, and entries that wait while Airflow cannot be reached. Publishing to a real Airflow is
tests/airflow/test_assets_e2e.py."""

from __future__ import annotations

from datetime import UTC, datetime

from airflow_stream_provider.airflow_api import AirflowApi
from airflow_stream_provider.streams import assets
from airflow_stream_provider.streams.fired import Fired


def at(minute: int) -> datetime:
    return datetime(2025, 1, 1, 0, minute, tzinfo=UTC)


def test_the_windows_of_fired_triggers_are_distinct_and_in_order():
    fired = [Fired(0, {"_twstart": at(5), "_twend": at(10)}), Fired(1, {"_twstart": at(0), "_twend": at(5)}),
             Fired(2, {"_twstart": at(0), "_twend": at(5)}, group=("d2",)),  # another group's same window
             Fired(3, {"_tprev_ts": at(10), "_tcurrent_ts": at(20)}), Fired(4, {"_tcurrent_ts": at(30)})]
    assert [(w["start"][11:16], w["end"][11:16]) for w in assets.windows_of(fired)] == [
        ("00:00", "00:05"), ("00:05", "00:10"), ("00:10", "00:20"), ("00:30", "00:30")]


def test_an_entry_is_one_event_per_batch_and_one_per_window_keyed_by_its_start():
    windows = assets.windows_of([Fired(0, {"_twstart": at(0), "_twend": at(5)}),
                                 Fired(1, {"_twstart": at(5), "_twend": at(10)})])
    item = assets.entry("d.s", assets.output_uri("D", "Out"), windows, 2, batches=(3, 4))
    assert item["uri"] == "airflow-stream://d/out" and item["id"] == "d.s/batches/3-4"
    (batch, _), *per_window = assets.events_of(item)
    assert batch == {"id": "d.s/batches/3-4", "stream": "d.s", "windows": windows, "rows": 2,
                     "batches": {"from": 3, "to": 4}, "versions": None, "instant": None, "recalculation": False}
    assert [key for _, key in per_window] == ["2025-01-01T00:00:00", "2025-01-01T00:05:00"]
    assert per_window[0][0]["window"] == windows[0] and per_window[0][0]["id"] == "d.s/batches/3-4/2025-01-01T00:00:00"
    again = assets.entry("d.s", item["uri"], windows, 2, recalculation="a/b/1")
    assert again["id"] == "d.s/recalc/a/b/1" and again["recalculation"] is True


def test_the_ledger_keeps_what_airflow_cannot_take_and_appends_a_commit_once(tmp_path):
    ledger = assets.AssetLedger(tmp_path)
    item = assets.entry("d.s", "airflow-stream://d/out", [], 1, batches=(0, 0))
    assert ledger.append(item) and not ledger.append(item)
    nobody = AirflowApi(url="http://127.0.0.1:9", timeout=1)  # nothing listens there
    assert ledger.publish(nobody) == 0
    assert [i["id"] for i in ledger.pending()] == ["d.s/batches/0-0"]
    assert assets._retry_at[nobody.url] > 0  # this process waits before trying that API again
    assert ledger.publish(nobody) == 0 and len(ledger.pending()) == 1
