"""IoTDB continuous queries as streams: CREATE, DROP and SHOW CQ, and the execution of due instants
(reference 004; ``shared/reference/iotdb-semantics.md`` C1-C19).

A continuous query is stored as a stream of the ``root`` namespace (``streams/root/<id>.sql``
holds the CREATE CQ text as written, which SHOW CQS prints): its DAG, SHOW STREAMS row, STOP and
START are those of any stream. Each instant ``i`` executes the query over ``[i - start_offset,
i - end_offset)``, from the scheduled instant even when it runs late, and writes its results into
the INTO series (column-wise: an execution that covers a time again overwrites it). Progress
(``last_fired``) is recorded after each instant, so a killed run repeats at most one execution,
which writes the same points again.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import pyarrow as pa

from airflow_stream_provider import model as m
from airflow_stream_provider.plan.schedule import ResampleSchedule, resample_schedule
from airflow_stream_provider.plan.state import StreamState
from airflow_stream_provider.sql.iotdb import CQ_NAMESPACE
from airflow_stream_provider.streams.runtime import RunReport
from airflow_stream_provider.streams.store import StoredStream, StreamStore
from airflow_stream_provider.values import EPOCH, epoch_micros
from airflow_stream_provider.warehouse import Result, Warehouse, WarehouseError
from airflow_stream_provider.warehouse.series.expressions import now_micros
from airflow_stream_provider.warehouse.series.statements import run_query
from airflow_stream_provider.warehouse.series.store import SeriesStore


def resample_schedule_of(stored: StoredStream, state: StreamState) -> ResampleSchedule:
    """The RESAMPLE schedule of the stored continuous query, anchored at its creation."""
    trig = stored.statement.trigger
    assert isinstance(trig, m.ResampleTrigger) and state.created is not None
    return resample_schedule(trig, state.created)


def create(warehouse: Warehouse, stmt: m.CreateStream, store: StreamStore | None = None) -> Result:
    """CREATE CQ: refused when the id is taken (ids compare without case here, as the files that
    hold them do); nothing else is checked against the data, as in IoTDB."""
    store = store or StreamStore()
    assert stmt.series is not None and isinstance(stmt.trigger, m.ResampleTrigger)
    cq_id = stmt.series.cq_id
    name = stmt.name.name.lower()
    if store.exists(CQ_NAMESPACE, name):
        other = store.get(CQ_NAMESPACE, name).statement.series
        shown = other.cq_id if other is not None else name
        raise WarehouseError(f"CQ {cq_id} has already been created" + ("" if shown == cq_id else f" (as {shown})"))
    now = datetime.now(UTC)
    store.create(CQ_NAMESPACE, stmt, stmt.text, StreamState(created=now))
    schedule = resample_schedule(stmt.trigger, now)
    trig = stmt.trigger
    return Result(stmt, f"created continuous query {cq_id}: every {trig.every}, each over [instant - "
                        f"{trig.start_offset}, instant - {trig.end_offset}), first at {schedule.first.isoformat()}")


def drop(warehouse: Warehouse, stmt: m.DropContinuousQuery, store: StreamStore | None = None) -> Result:
    """DROP CQ: the definition and progress go; the series it wrote stay."""
    store = store or StreamStore()
    name = stmt.cq_id.lower()
    if not store.exists(CQ_NAMESPACE, name) or store.get(CQ_NAMESPACE, name).statement.series is None:
        raise WarehouseError(f"CQ {stmt.cq_id} doesn't exist")
    store.drop(CQ_NAMESPACE, name)
    return Result(stmt, f"dropped continuous query {stmt.cq_id}")


def show(warehouse: Warehouse, stmt: m.ShowContinuousQueries, store: StreamStore | None = None) -> Result:
    """SHOW CQS: ``cq_id | query | state`` by id; the query as it was written, the state ACTIVE
    (STOPPED after STOP STREAM root.<id>)."""
    store = store or StreamStore()
    rows = []
    for db, name in store.names():
        if db != CQ_NAMESPACE:
            continue
        stored = store.get(db, name)
        if stored.statement.series is None:
            continue
        state = store.load_state(db, name)
        rows.append((stored.statement.series.cq_id, stored.statement.text, "STOPPED" if state.stopped
                     else "ACTIVE"))
    rows.sort()
    table = pa.table({"cq_id": [r[0] for r in rows], "query": [r[1] for r in rows], "state": [r[2] for r in rows]})
    return Result(stmt, f"{len(rows)} continuous quer{'y' if len(rows) == 1 else 'ies'}", table=table)


def run(warehouse: Warehouse, stored: StoredStream, state: StreamState, store: StreamStore, report: RunReport, *,
        now: datetime, at: datetime | None, say: Callable[[str], None], commit: bool) -> dict:
    """Execute the due instants (or the one instant ``at`` of an Airflow run); the progress.

    BLOCKED executes every due instant in order; DISCARD the pending one and then the first at or
    after ``now`` (:func:`discard_due`). Without Airflow each instant's progress is committed when
    it is written."""
    series = stored.statement.series
    trig = stored.statement.trigger
    assert series is not None and isinstance(trig, m.ResampleTrigger)
    schedule = resample_schedule_of(stored, state)
    update: dict = {}
    if at is not None:
        due = [at]
    elif trig.policy == m.TimeoutPolicy.DISCARD:
        due, resume, discarded = discard_due(schedule, state, now)
        report.discarded_instants += discarded
        if due:
            update["resume_at"] = resume.isoformat() if resume is not None else None
    else:
        last = state.last_fired
        due = list(schedule.instants(last if last is not None else schedule.first - timedelta(microseconds=1), now))
    spark = warehouse.spark
    points = SeriesStore(warehouse.catalog)
    for instant in due:
        start = epoch_micros(instant - trig.start_offset.to_timedelta())
        end = epoch_micros(instant - trig.end_offset.to_timedelta())
        say(f"{series.cq_id}: executing at {instant.isoformat()} over [{_iso(start)}, {_iso(end)})")
        summary = run_query(points, spark, series.query, start, end, now_micros())
        written = sum(summary["written"].to_pylist()) if summary.num_rows else 0
        report.triggers += 1
        report.written += written
        report.result_rows += written
        update["last_fired"] = instant.isoformat()
        if commit and at is None:
            with store.updating(stored.db, stored.name) as saving:
                if saving.state.last_fired is None or saving.state.last_fired < instant:
                    saving.state = saving.state.replace(last_fired=instant)
    return update


def discard_due(schedule: ResampleSchedule, state: StreamState, now: datetime
                ) -> tuple[list[datetime], datetime | None, int]:
    """TIMEOUT POLICY DISCARD at ``now``: the instants to execute, the instant to resume at when it
    is still to come, and how many instants are discarded.

    IoTDB (``CQScheduleTask``, C13/C14) executes the pending instant however late it is, then moves
    to ``exec + ((now - exec - 1) / every + 1) * every``: the next instant when ``now`` is not past
    it, else the first instant at or after ``now``, which is due at once when it is ``now`` itself.
    The pending instant is the one after the last executed, or the one an earlier jump landed on."""
    last = state.last_fired
    pending = schedule.next_after(last) if last is not None else schedule.first
    if state.resume_at is not None and state.resume_at > pending:
        pending = state.resume_at
    if pending > now:
        return [], None, 0
    landing = schedule.at_or_after(now) if now > pending else pending + schedule.every
    discarded = (landing - pending) // schedule.every - 1
    if landing <= now:
        return [pending, landing], None, discarded
    return [pending], landing, discarded


def _iso(micros: int) -> str:
    return (EPOCH + timedelta(microseconds=micros)).isoformat()
