"""VERIFY STREAM of a notify-only stream: the results its sent notifications carried, against the
batch's; the outbox's record of sent messages, kept within its limits.

An INTERVAL(5m) stream without INTO notifies a real receiver of each closed window. Its record of
what it sent is then altered by hand (one result value changed, one window's event taken out, one
event of a window no trigger gives added): VERIFY must report exactly those three, REPAIR must send
the corrected events (and withdraw the added one with WINDOW_INVALIDATION) and verify clean. The
expected results are worked by hand from the rows.
"""

from __future__ import annotations

import json
import time
from datetime import timedelta

import pytest

from airflow_stream_provider.notify.message import NotifyEvent
from airflow_stream_provider.notify.outbox import Outbox
from airflow_stream_provider.streams.run import run as run_stream
from airflow_stream_provider.streams.store import StreamStore
from airflow_stream_provider.streams.verify import verify
from tests.conftest import sql
from tests.notify.conftest import ReceiverProcess, events_of
from tests.verify.test_verify import LATER, SCHEMA, T0, T1, T2, insert

MS = 60_000


def ms(minute: int) -> int:
    return int((T0 + timedelta(minutes=minute)).timestamp() * 1000)


@pytest.mark.spark
def test_a_notify_only_stream_verifies_what_it_sent_and_repair_sends_it_again(wh, tmp_path):
    receiver = ReceiverProcess(tmp_path).start()
    try:
        sql(wh, SCHEMA)
        sql(wh, f"CREATE STREAM s INTERVAL(5m) SLIDING(5m) FROM m PARTITION BY tbname NOTIFY('{receiver.url}') "
                "ON (WINDOW_CLOSE) AS SELECT _twstart ws, avg(col1) a, max(col1) mx, count(*) n FROM %%trows")
        insert(wh, "t1", T1 + LATER)
        insert(wh, "t2", T2 + LATER)
        run_stream(wh, "d", "s")
        # closed 5-minute windows (the rows at 00:40 close [00:35, 00:40)), by hand; a window between
        # two rows fires without rows too (avg NULL, count 0), as in the output-table cases:
        # t1: [0,5) 1,3,5; [5,10) 10,20; [10,15) 7,9; [15,20) -; [20,25) 4; [25,30) 2; [30,35) 5; [35,40) -
        # t2: [0,5) 2,4; [5,10) 6,8; [10,15) -; [15,20) -; [20,25) 1; [25,30) 2; [30,35) 5; [35,40) -
        sent = {(e["tableName"], (e["windowStart"] - ms(0)) // MS): (e["result"]["a"], e["result"]["mx"],
                                                                      e["result"]["n"])
                for e in events_of(receiver.messages())}
        t1 = next(t for (t, minute), result in sent.items() if minute == 10 and result[2] == 2)
        (t2,) = {t for t, _ in sent} - {t1}
        empty = (None, None, 0)
        assert sent == {(t1, 0): (3.0, 5, 3), (t1, 5): (15.0, 20, 2), (t1, 10): (8.0, 9, 2), (t1, 15): empty,
                        (t1, 20): (4.0, 4, 1), (t1, 25): (2.0, 2, 1), (t1, 30): (5.0, 5, 1), (t1, 35): empty,
                        (t2, 0): (3.0, 4, 2), (t2, 5): (7.0, 8, 2), (t2, 10): empty, (t2, 15): empty,
                        (t2, 20): (1.0, 1, 1), (t2, 25): (2.0, 2, 1), (t2, 30): (5.0, 5, 1), (t2, 35): empty}

        clean = verify(wh, "d", "s")
        assert clean.equal, clean.differences
        assert (clean.rows, clean.compared) == (16, 16)
        assert "16 result rows against 16 sent results" in clean.summary()

        # alter the record of what was sent: t1's [0,5) average, t2's [5,10) event gone, an event
        # of a window [00:50, 00:55) of t1 that no trigger gives
        stored = StreamStore().get("d", "s")
        path = stored.state_dir / "outbox" / "sent.jsonl"
        lines = [json.loads(line) for line in path.read_text().splitlines()]
        template = None
        for line in lines:
            body = json.loads(line["text"])
            events = body["streams"][0]["events"]
            keep, keys = [], []
            for key, ev in zip(line["keys"], events):
                at = (ev["windowStart"] - ms(0)) // MS
                if (ev["tableName"], at) == (t1, 0):
                    ev["result"]["a"] = 99.5
                    template = dict(ev)
                if (ev["tableName"], at) == (t2, 5):
                    continue
                keep.append(ev)
                keys.append(key)
            body["streams"][0]["events"] = keep
            line["keys"], line["text"] = keys, json.dumps(body)
        assert template is not None
        fake = {**template, "triggerId": "fake", "windowStart": ms(50), "windowEnd": ms(55),
                "result": {"ws": ms(50), "a": 1.5, "mx": 2, "n": 2}}
        lines.append({"seq": lines[-1]["seq"] + 1, "sent_at": lines[-1]["sent_at"], "keys": ["s/fake"],
                      "text": json.dumps({"messageId": "x", "timestamp": 0,
                                          "streams": [{"streamName": "s", "events": [fake]}]})})
        path.write_text("".join(json.dumps(line) + "\n" for line in lines))

        found = verify(wh, "d", "s")
        seen = {(d.status, d.table, d.ts): (d.columns, d.old, d.new) for d in found.differences}
        at = {m: T0 + timedelta(minutes=m) for m in (0, 5, 50)}
        assert seen == {
            ("different", t1, at[0]): (("a",), (99.5,), (3.0,)),
            ("missing", t2, at[5]): (("ws", "a", "mx", "n"), None, (ms(5), 7.0, 8, 2)),
            ("extra", t1, at[50]): (("ws", "a", "mx", "n"), (ms(50), 1.5, 2, 2), None)}
        assert "3 differences (1 missing, 1 extra, 1 different)" in found.summary()

        before = len(events_of(receiver.messages()))
        repaired = verify(wh, "d", "s", repair=True)
        assert repaired.equal, repaired.differences
        assert repaired.repaired is not None and len(repaired.repaired) == 3
        again = [(e["eventType"], e["tableName"], (e["windowStart"] - ms(0)) // MS, e.get("result", {}).get("a"))
                 for e in receiver.messages()[-1]["streams"][0]["events"]]
        assert len(events_of(receiver.messages())) > before
        assert sorted(again, key=str) == sorted([("WINDOW_CLOSE", t1, 0, 3.0), ("WINDOW_CLOSE", t2, 5, 7.0),
                                                 ("WINDOW_INVALIDATION", t1, 50, None)], key=str)
    finally:
        receiver.stop()


def _event(minute: int) -> NotifyEvent:
    return NotifyEvent(stream="s", key=f"k{minute}", table_name="t", event_type="WINDOW_CLOSE",
                       event_time=ms(minute), trigger_id=f"w{minute}", trigger_type="Period", group_id="g",
                       fields={"windowStart": ms(minute)}, result={"v": minute})


def test_the_outbox_keeps_the_latest_sent_messages_and_says_where_it_forgot(tmp_path, monkeypatch):
    monkeypatch.setenv("AIRFLOW_STREAM_NOTIFY_KEEP_SENT_MESSAGES", "2")
    box = Outbox(tmp_path, ["ws://r"])
    for minute in range(5):  # one message each
        (queued,) = box.enqueue([_event(minute)], now_ms=minute)
        box.mark("ws://r", [queued], delivered=True)
        box.prune()
    sent, forgotten = box.sent()
    # 2 kept, trimmed once 2 + 1 were exceeded: after the 4th message (1 and 2 dropped, 3 and 4 kept),
    # then the 5th added; the latest window start forgotten is the 2nd message's (minute 1)
    assert [e.body["windowStart"] for e in sent] == [ms(2), ms(3), ms(4)]
    assert forgotten == ms(1)
    # a message dropped for its receiver was not sent, and is not kept
    (queued,) = box.enqueue([_event(9)], now_ms=9)
    box.mark("ws://r", [queued], delivered=False)
    box.prune()
    assert [e.body["windowStart"] for e in box.sent()[0]] == [ms(2), ms(3), ms(4)]
    # kept no longer than keep_sent_days
    monkeypatch.setenv("AIRFLOW_STREAM_NOTIFY_KEEP_SENT_DAYS", "0.0000001")
    (queued,) = box.enqueue([_event(10)], now_ms=10)
    time.sleep(0.05)
    box.mark("ws://r", [queued], delivered=True)
    assert [e.body["windowStart"] for e in box.sent()[0]] == [ms(10)]
