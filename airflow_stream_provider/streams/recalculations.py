"""A stream's recalculation requests, as ``information_schema.ins_stream_recalculates`` lists them
(TDengine 3.4.2.5): one :class:`Recalculation` per request, whatever asked for it (RECALCULATE
STREAM, the live recalculation of late rows or of deletes under DELETE_RECALC, VERIFY ... REPAIR).

A request is ``Pending`` when it is accepted, ``Running`` once its first part ran, ``Finished``
(progress ``100%``) when every part ran and ``Failed``, with the error as its message, when a part
failed for good. Its parts are the runs of the ``__recalc`` backfill when Airflow runs it (one per
slice of the recalculation DAG's timetable: the progress is the share of slices done, and follows
those runs), else the one recalculation in the process.

The requests are kept in ``recalculations.json`` under the stream's state folder, so they survive a
restart of whatever runs them. As TDengine does, a request that ended is kept for an hour after it
ended, and a stream keeps its latest 100 ended requests; the pending and running ones are all kept.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, tzinfo
from pathlib import Path
from typing import Any

import pyarrow as pa

from airflow_stream_provider.exceptions import StreamError
from airflow_stream_provider.files import hold_lock, write_text
from airflow_stream_provider.plan.schedule import Schedule
from airflow_stream_provider.streams.store import StoredStream, StreamStore

PENDING, RUNNING, FINISHED, FAILED = "Pending", "Running", "Finished", "Failed"
#: the states a request ends in
ENDED = (FINISHED, FAILED)
#: how long an ended request is kept, from when it ended (seconds) ...
KEPT_S = 3600.0
#: ... and how many ended requests a stream keeps, the latest
KEPT_ENDED = 100

#: what asked for a recalculation
REQUESTED, LATE_ROWS, REPAIR = "RECALCULATE STREAM", "late rows", "REPAIR"
#: a live recalculation of a DELETE_RECALC stream (late rows, updates and deletes look alike in its events)
DELETES = "late rows or deletes (DELETE_RECALC)"

#: (column, Arrow type) of an ``information_schema.ins_stream_recalculates`` row: TDengine's but
#: ``stream_id`` (a stream is known by its database and name), with ``db_name`` and ``reason`` besides
COLUMNS = (
    ("stream_name", pa.string()),
    ("db_name", pa.string()),
    ("recalc_id", pa.string()),
    ("start", pa.timestamp("us", tz="UTC")),
    ("end", pa.timestamp("us", tz="UTC")),
    ("progress", pa.string()),  # "0%" ... "100%"
    ("status", pa.string()),  # Pending, Running, Finished, Failed
    ("request_time", pa.timestamp("us", tz="UTC")),
    ("message", pa.string()),
    ("reason", pa.string()),  # what asked for it: RECALCULATE STREAM, late rows, DELETE_RECALC, REPAIR
)


@dataclass(frozen=True)
class Recalculation:
    """One recalculation request.

    :param start: the event time it recalculates from (inclusive) ...
    :param end: ... and to (exclusive)
    :param slices: how many parts it runs in (the backfill's runs; 1 in the process)
    :param done: the parts that ran, by the start of their slice (ISO): a part run again counts once
    :param ended: when it finished or failed (what it is kept for an hour after)
    :param backfill: the Airflow backfill that runs it, when one does
    """

    recalc_id: str
    reason: str
    start: datetime
    end: datetime
    request_time: datetime
    status: str = PENDING
    slices: int = 1
    done: tuple[str, ...] = ()
    message: str | None = None
    ended: datetime | None = None
    backfill: str | None = None

    @property
    def progress(self) -> str:
        """The share of its parts done, as TDengine writes it (``"40%"``); ``100%`` once finished."""
        if self.status == FINISHED:
            return "100%"
        return f"{min(99, len(self.done) * 100 // max(1, self.slices))}%"

    def to_json(self) -> dict:
        out = {}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            out[f.name] = value.isoformat() if isinstance(value, datetime) else \
                list(value) if isinstance(value, tuple) else value
        return out

    @classmethod
    def from_json(cls, payload: dict) -> Recalculation:
        values: dict[str, Any] = {f.name: payload[f.name] for f in dataclasses.fields(cls) if f.name in payload}
        for key in ("start", "end", "request_time", "ended"):
            if values.get(key) is not None:
                values[key] = datetime.fromisoformat(values[key])
        values["done"] = tuple(values.get("done") or ())
        return cls(**values)


def _path(stored: StoredStream) -> Path:
    return stored.state_dir / "recalculations.json"


def _read(stored: StoredStream) -> list[Recalculation]:
    try:
        payload = json.loads(_path(stored).read_text(encoding="utf-8"))
    except (FileNotFoundError, ValueError):
        return []
    return [Recalculation.from_json(item) for item in payload.get("recalculations", [])]


def kept(found: list[Recalculation], now: datetime) -> list[Recalculation]:
    """The requests of ``found`` still kept at ``now``: every pending and running one, and the ended
    ones that ended less than :data:`KEPT_S` ago, the latest :data:`KEPT_ENDED` of them."""
    horizon = now - timedelta(seconds=KEPT_S)
    ended = [r for r in found if r.status in ENDED and (r.ended or r.request_time) > horizon]
    ended.sort(key=lambda r: (r.ended or r.request_time, r.recalc_id))
    keep = {r.recalc_id for r in ended[-KEPT_ENDED:]}
    return [r for r in found if r.status not in ENDED or r.recalc_id in keep]


@contextmanager
def _changing(stored: StoredStream, now: datetime) -> Iterator[list[Recalculation]]:
    """The stream's requests, to change in place while the block runs (under the file's lock);
    written back, those :func:`kept` at ``now``."""
    stored.state_dir.mkdir(parents=True, exist_ok=True)
    with hold_lock(stored.state_dir / "recalculations.lock"):
        found = _read(stored)
        yield found
        text = json.dumps({"recalculations": [r.to_json() for r in kept(found, now)]}, indent=1)
        write_text(_path(stored), text + "\n")


def records(stored: StoredStream, now: datetime | None = None) -> list[Recalculation]:
    """The stream's requests kept at ``now``, in the order they were made."""
    return kept(_read(stored), now or datetime.now(UTC))


def request(stored: StoredStream, reason: str, start: datetime, end: datetime, *, slices: int = 1,
            backfill: str | None = None, now: datetime | None = None) -> Recalculation:
    """Record a new request, ``Pending``: recalculate ``[start, end)`` in ``slices`` parts."""
    now = now or datetime.now(UTC)
    with _changing(stored, now) as found:
        ident = int(now.timestamp() * 1_000_000)
        taken = {r.recalc_id for r in found}
        while str(ident) in taken:  # (two requests in one microsecond)
            ident += 1
        made = Recalculation(str(ident), reason, start, end, now, slices=max(1, slices), backfill=backfill)
        found.append(made)
    return made


def _change(stored: StoredStream, recalc_id: str, how: Callable[[Recalculation], Recalculation],
            now: datetime) -> Recalculation | None:
    with _changing(stored, now) as found:
        for i, r in enumerate(found):
            if r.recalc_id == recalc_id:
                found[i] = how(r)
                return found[i]
    return None


def started(stored: StoredStream, recalc_id: str, now: datetime | None = None) -> Recalculation | None:
    """The request runs (its first part started)."""
    return _change(stored, recalc_id, lambda r: r if r.status in ENDED else dataclasses.replace(r, status=RUNNING),
                   now or datetime.now(UTC))


def part_done(stored: StoredStream, recalc_id: str, part: datetime,
              now: datetime | None = None) -> Recalculation | None:
    """The part of the request whose slice starts at ``part`` ran: ``Finished`` once every part did."""
    now = now or datetime.now(UTC)

    def done(r: Recalculation) -> Recalculation:
        if r.status in ENDED:
            return r
        parts = tuple(sorted({*r.done, part.isoformat()}))
        if len(parts) >= r.slices:
            return dataclasses.replace(r, done=parts, status=FINISHED, ended=now, message=None)
        return dataclasses.replace(r, done=parts, status=RUNNING)

    return _change(stored, recalc_id, done, now)


def failed(stored: StoredStream, recalc_id: str, message: str, *, final: bool = True,
           now: datetime | None = None) -> Recalculation | None:
    """A part of the request failed with ``message``: ``Failed`` when nothing will run it again
    (``final``), else it stays ``Running`` with the message, its part to be retried."""
    now = now or datetime.now(UTC)

    def fail(r: Recalculation) -> Recalculation:
        if r.status in ENDED:
            return r
        if final:
            return dataclasses.replace(r, status=FAILED, ended=now, message=message)
        return dataclasses.replace(r, status=RUNNING, message=f"retried after: {message}")

    return _change(stored, recalc_id, fail, now)


def finished(stored: StoredStream, reason: str, start: datetime, end: datetime,
             now: datetime | None = None) -> Recalculation:
    """Record a request that ran at once, in one part, and finished (a live recalculation)."""
    made = request(stored, reason, start, end, now=now)
    done = part_done(stored, made.recalc_id, start, now=now)
    assert done is not None
    return done


def covering(stored: StoredStream, start: datetime) -> Recalculation | None:
    """The oldest open RECALCULATE STREAM request whose range holds ``start``, where a run of the
    ``__recalc`` backfill begins its slice: the request that run is a part of."""
    for r in records(stored):
        if r.reason == REQUESTED and r.status not in ENDED and r.start <= start < r.end:
            return r
    return None


@contextmanager
def running(stored: StoredStream, reason: str, start: datetime, end: datetime) -> Iterator[Recalculation]:
    """A request run at once, in one part, by the block: ``Running`` while it runs, then
    ``Finished``, or ``Failed`` with the error it raised (raised on)."""
    made = request(stored, reason, start, end)
    started(stored, made.recalc_id)
    try:
        yield made
    except Exception as err:
        failed(stored, made.recalc_id, f"{type(err).__name__}: {err}")
        raise
    part_done(stored, made.recalc_id, start)


def backfill_slices(step: timedelta, tz: tzinfo, start: datetime, end: datetime) -> int:
    """How many runs a backfill of the ``__recalc`` DAG over ``[start, end)`` makes: its timetable's
    slices of ``step`` (from local midnight, as :class:`~airflow_stream_provider.plan.schedule.Schedule`
    lays them) that begin in the range."""
    schedule = Schedule(step, timedelta(0), tz, datetime(1970, 1, 1, tzinfo=UTC))
    return sum(1 for _ in schedule.instants(start - timedelta(microseconds=1), end - timedelta(microseconds=1)))


def recalculates_table(store: StreamStore | None = None, now: datetime | None = None) -> pa.Table:
    """``information_schema.ins_stream_recalculates``: the requests of every stream, with :data:`COLUMNS`."""
    store = store or StreamStore()
    now = now or datetime.now(UTC)
    rows: list[dict[str, Any]] = []
    for db, name in store.names():
        try:
            stored = store.get(db, name)
        except StreamError:  # (a stream that cannot be read has its row in ins_streams, failed)
            continue
        rows.extend({"stream_name": name, "db_name": db, "recalc_id": r.recalc_id, "start": r.start, "end": r.end,
                     "progress": r.progress, "status": r.status, "request_time": r.request_time,
                     "message": r.message, "reason": r.reason} for r in records(stored, now))
    return pa.table({col: pa.array([r[col] for r in rows], kind) for col, kind in COLUMNS})
