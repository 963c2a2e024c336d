"""VERIFY STREAM of a notify-only stream (NOTIFY without INTO, or CALC_NOTIFY_ONLY): the results its
notifications carried, compared with the batch's.

The triggers of the range are found again and computed in batch as for a stream with an output
table (:mod:`.verify`), and turned into the notifications a run sends (the same ``NOTIFY ... ON``,
``WHERE`` and ``NOTIFY_HISTORY`` rules, :class:`~.notifications.RunNotifications`). Of those, the
events that carry a result (``WINDOW_CLOSE``, ``ON_TIME``) are compared with the last notification
of the same window (trigger id, group id, result row) among the messages the outbox keeps as sent
(``sent.jsonl``, :mod:`airflow_stream_provider.notify.outbox`) or still waiting to go: ``missing``
(the batch gives a result no notification carried), ``extra`` (a notification carried a result the
batch does not give) or ``different`` (the result's columns that differ). A window withdrawn by a
later ``WINDOW_INVALIDATION`` counts as not sent. Windows whose notifications may have been among
the sent messages the outbox no longer keeps (``[notify] keep_sent_messages`` / ``keep_sent_days``)
are not judged, and the summary says so.

REPAIR sends corrected notifications: for each window missing or different, the event the batch
gives, once more (to every receiver, as a new message), and for each extra window event a
``WINDOW_INVALIDATION`` withdrawing it; an extra ``ON_TIME`` result has no event that withdraws it,
so it stays reported.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from airflow_stream_provider.model.events import EventType
from airflow_stream_provider.notify.delivery import Settings
from airflow_stream_provider.notify.message import NotifyEvent
from airflow_stream_provider.plan.state import StreamState
from airflow_stream_provider.streams import recalculations
from airflow_stream_provider.streams.fired import Fired
from airflow_stream_provider.streams.notifications import RunNotifications, deliver_outbox, outbox_of
from airflow_stream_provider.streams.run import notify_patience
from airflow_stream_provider.streams.runtime import RunReport, StreamRuntime
from airflow_stream_provider.streams.store import StoredStream, run_lock
from airflow_stream_provider.streams.verify_report import DIFFERENT, EXTRA, MISSING, Difference, VerifyReport, same
from airflow_stream_provider.streams.write import compute_results, table_names
from airflow_stream_provider.windows.events import WindowEvent

#: the events whose notification carries a trigger's result
WITH_RESULT = (EventType.WINDOW_CLOSE, EventType.ON_TIME)

#: (group id, trigger id, result row): one result a notification carries
Key = tuple[str, str, int]


def notify_only(runtime: StreamRuntime) -> bool:
    return runtime.output_plan is None and runtime.compute is not None and runtime.stmt.notify is not None


def verify(runtime: StreamRuntime, stored: StoredStream, state: StreamState, fired: list[Fired],
           events: list[WindowEvent] | None, report: VerifyReport, say: Callable[[str], None]) -> list[NotifyEvent]:
    """Fill ``report`` with the differences between the notifications of ``fired`` the batch gives
    and those sent; the batch's result-carrying events, for REPAIR."""
    expected = _expected(runtime, stored, state, fired, events)
    box = outbox_of(stored)
    assert box is not None
    sent, forgotten = box.sent()
    precision = runtime.precision
    style_336 = runtime.stmt.notify is not None and runtime.stmt.notify.message_format == "3.3.6"
    range_start, range_end = _moment(report.start, precision), _moment(report.end, precision)
    in_range = {_key(f.group_id, f.trigger_id, 0, style_336) for f in fired}

    def judged(moment: int | None) -> bool:
        return moment is not None and (forgotten is None or moment > forgotten)

    mine: dict[Key, NotifyEvent] = {}
    skipped = set()
    for ev in expected:
        key = _key(ev.group_id, ev.trigger_id, _row(ev.key), style_336)
        if judged(_event_moment(ev.to_json())):
            mine[key] = ev
        else:
            skipped.add(key[:2])
    theirs = _last_sent(sent, runtime.name, style_336)
    theirs = {k: body for k, body in theirs.items()
              if judged(_event_moment(body)) and (k[:2] + (0,) in in_range or _within(body, range_start, range_end))}
    report.rows, report.compared = len(mine), len(theirs)
    report.forgotten = len(skipped)
    if skipped:
        say(f"{len(skipped)} window(s) notified before the oldest sent message the outbox keeps are not judged")
    found = []
    for key in mine.keys() | theirs.keys():
        new, old = mine.get(key), theirs.get(key)
        body = new.to_json() if new is not None else old
        assert body is not None
        table, at = body.get("tableName", ""), _datetime(_event_moment(body), precision, body)
        columns = tuple((new.result or {}) if new is not None else (old or {}).get("result") or {})
        if old is None:
            assert new is not None
            found.append(Difference(MISSING, table, at, key[1], key[0], columns, None,
                                    tuple((new.result or {}).get(c) for c in columns), key))
        elif new is None:
            result = old.get("result") or {}
            found.append(Difference(EXTRA, table, at, key[1], key[0], columns, tuple(result.get(c) for c in columns),
                                    None, key))
        else:
            a, b = new.result or {}, old.get("result") or {}
            changed = tuple(c for c in [*a, *(c for c in b if c not in a)] if not same(a.get(c), b.get(c)))
            if changed:
                found.append(Difference(DIFFERENT, table, at, key[1], key[0], changed,
                                        tuple(b.get(c) for c in changed), tuple(a.get(c) for c in changed), key))
    report.differences = sorted(found, key=lambda d: (d.ts, d.table, d.status))
    report.notified = True
    say(f"compared {report.rows} notified result(s) with {report.compared} sent")
    return expected


def _expected(runtime: StreamRuntime, stored: StoredStream, state: StreamState, fired: list[Fired],
              events: list[WindowEvent] | None) -> list[NotifyEvent]:
    """The result-carrying notifications a run sends for ``fired``."""
    if not fired:
        return []
    notes = RunNotifications(runtime, state)
    results, computed = compute_results(runtime, fired, RunReport(stored.qualified))
    notes.collect(computed, results)
    _queue(runtime, notes, fired, events)
    return [ev for ev in notes.events if ev.event_type in WITH_RESULT]


def _queue(runtime: StreamRuntime, notes: RunNotifications, fired: list[Fired],
           events: list[WindowEvent] | None) -> None:
    """The run's events of ``fired`` (as :func:`~.run.queue_notifications` makes them), in ``notes``."""
    if events is not None:
        names = table_names(runtime, {e.group_id: runtime.group_key(runtime.group_values(json.loads(e.group_keys)))
                                      for e in events})
        notes.add_windows(events, fired, names)
    else:
        notes.add_scheduled(fired, table_names(runtime, {f.group_id: f.group for f in fired}))


def _last_sent(sent: list, stream: str, style_336: bool) -> dict[Key, dict]:
    """The last result-carrying event sent for each window's result row (a window withdrawn since
    by WINDOW_INVALIDATION: none)."""
    latest: dict[tuple[str, str], int] = {}
    out: dict[Key, dict] = {}
    for item in sent:  # (in order)
        body = item.body
        if not item.key.startswith(f"{stream}/"):
            continue
        gid, tid = ("" if style_336 else str(body.get("groupId", ""))), str(body.get("triggerId", body.get("windowId")))
        kind = body.get("eventType")
        if kind == EventType.WINDOW_INVALIDATION:
            for k in [k for k in out if k[:2] == (gid, tid)]:
                del out[k]
            continue
        if kind not in WITH_RESULT:
            continue
        if latest.get((gid, tid)) != item.seq and _row(item.key) == 0:  # a new notification of the window
            for k in [k for k in out if k[:2] == (gid, tid)]:
                del out[k]
            latest[(gid, tid)] = item.seq
        out[(gid, tid, _row(item.key))] = body
    return {k: v for k, v in out.items() if v.get("result") is not None}


def _key(group_id: str, trigger_id: str, row: int, style_336: bool) -> Key:
    return ("" if style_336 else group_id, trigger_id, row)


def _row(key: str) -> int:
    """A result row's place among its trigger's (``#<row>`` after the event's key; 0 without)."""
    tail = key.rsplit("/", 1)[-1]
    return int(tail.rsplit("#", 1)[1]) if "#" in tail and tail.rsplit("#", 1)[1].isdigit() else 0


def _event_moment(body: dict) -> int | None:
    """When an event's window starts (in the precision) or its instant is (ms)."""
    value = body.get("windowStart", body.get("eventTime"))
    return value if isinstance(value, int) else None


def _moment(at: datetime, precision: str) -> int:
    micros = (at - datetime(1970, 1, 1, tzinfo=UTC)) // timedelta(microseconds=1)
    return micros // 1000 if precision == "ms" else micros


def _within(body: dict, start: int, end: int) -> bool:
    moment = _event_moment(body)
    return moment is not None and start <= moment < end


def _datetime(moment: int | None, precision: str, body: dict) -> datetime:
    if moment is None:
        return datetime(1970, 1, 1, tzinfo=UTC)
    unit = "ms" if "windowStart" not in body or precision == "ms" else "us"
    return datetime(1970, 1, 1, tzinfo=UTC) + timedelta(microseconds=moment * (1000 if unit == "ms" else 1))


def repair(runtime: StreamRuntime, stored: StoredStream, expected: list[NotifyEvent], found: VerifyReport,
           say: Callable[[str], None]) -> RunReport:
    """Send the corrected notifications of the windows that differ, and withdraw the extra ones."""
    style_336 = runtime.stmt.notify is not None and runtime.stmt.notify.message_format == "3.3.6"
    wrong = {d.key for d in found.differences if d.status != EXTRA}
    extra = [d for d in found.differences if d.status == EXTRA]
    report = RunReport(stored.qualified)
    with run_lock(stored), recalculations.running(stored, recalculations.REPAIR, found.start, found.end) as made:
        tag = f"repair:{made.recalc_id}"
        again = [_rekeyed(ev, tag) for ev in expected
                 if _key(ev.group_id, ev.trigger_id, _row(ev.key), style_336) in wrong]
        resent = {key[:2] for key in wrong}
        withdrawn = {key[:2] for key in (d.key for d in extra) if key[:2] not in resent}
        box = outbox_of(stored)
        assert box is not None
        sent, _ = box.sent()
        for item in sent:
            body = item.body
            gid = "" if style_336 else str(body.get("groupId", ""))
            tid = str(body.get("triggerId", body.get("windowId")))
            if (gid, tid) in withdrawn and body.get("eventType") == EventType.WINDOW_CLOSE and "windowStart" in body:
                withdrawn.discard((gid, tid))
                fields = {k: body[k] for k in ("windowStart", "windowEnd") if k in body}
                again.append(NotifyEvent(stream=runtime.name, key=f"{tag}:{tid}:invalidation",
                                         table_name=body.get("tableName", ""), event_type=EventType.WINDOW_INVALIDATION,
                                         event_time=body.get("eventTime", 0), trigger_id=tid,
                                         trigger_type=str(body.get("triggerType", "")), group_id=gid, fields=fields,
                                         style=runtime.stmt.notify.message_format if runtime.stmt.notify else "3.3.7"))
        box.enqueue(again, max_bytes=Settings.load().max_message_bytes)
        report.triggers, report.notified = len({(e.group_id, e.trigger_id) for e in again}), len(again)
        say(f"sending {len(again)} corrected notification event(s)")
        deliver_outbox(stored, give_up_after=notify_patience(), say=say)
    return report


def _rekeyed(ev: NotifyEvent, tag: str) -> NotifyEvent:
    return dataclasses.replace(ev, key=f"{tag}:{ev.key}", batch=None)

