"""VERIFY STREAM: a stream's triggers of a range of event time computed again in batch and compared
with what its output table holds; REPAIR recalculates exactly the windows that differ.

What is recomputed is what the stream itself computed, read the same way:

- window triggers (INTERVAL, SESSION, STATE_WINDOW, EVENT_WINDOW, COUNT_WINDOW, and TDengine's
  streams before 3.3.7): the windows the detector's core finds in batch over the trigger table at
  the version the stream's progress names (``detected_version``, Delta time travel), closing only
  where the rows prove it, as the live detector did; a window still open there is not judged;
- SLIDING: the instants each group's event time passed, at the table's version now;
- PERIOD: the instants fired so far, each over the table at its own instant's version, %%trows
  the rows written since the previous instant (as a run reads them);
- an IoTDB continuous query: :mod:`.verify_cq`.

Each trigger's results become output rows exactly as a run writes them (subtable, tags, column
mapping); they are compared with the output table's rows by the table's key (``tbname``, the
timestamp and a composite key), over the rows whose timestamp is in ``[FROM, TO)`` and the keys the
triggers give. A row is ``missing`` (computed, not in the output), ``extra`` (in the output, not
computed) or ``different`` (the columns that differ, with the output's and the batch's values;
floating-point values are equal within a relative 1e-9, Spark adding them in no fixed order).

A range whose rows the table no longer has at the version needed (files removed by VACUUM) is
refused, as a comparison with them would judge rows that cannot be read.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from urllib.parse import unquote, urlparse

import pyarrow as pa
import pyarrow.compute as pc
from deltalake import DeltaTable
from pyspark.sql import functions as F

from airflow_stream_provider import model as m
from airflow_stream_provider.airflow_api import AirflowApi
from airflow_stream_provider.exceptions import StreamError
from airflow_stream_provider.model.events import EventType, StreamKind
from airflow_stream_provider.notify.message import NotifyEvent
from airflow_stream_provider.plan.schedule import Schedule
from airflow_stream_provider.plan.state import StreamState
from airflow_stream_provider.plan.stream import plan_stream
from airflow_stream_provider.streams import recalculations, retention, verify_cq, verify_notify, verify_repair
from airflow_stream_provider.streams.fire import schedules, windows
from airflow_stream_provider.streams.fired import Fired
from airflow_stream_provider.streams.probes import batch_version, version_at
from airflow_stream_provider.streams.run import process
from airflow_stream_provider.streams.runtime import RunReport, StreamRuntime, in_database
from airflow_stream_provider.streams.store import StoredStream, StreamStore, run_lock
from airflow_stream_provider.streams.verify_report import DIFFERENT, EXTRA, MISSING, Difference, VerifyReport, same
from airflow_stream_provider.streams.write import compute_results, output_rows
from airflow_stream_provider.warehouse import Result, Warehouse, mapping, writer
from airflow_stream_provider.warehouse.catalog import TBNAME, TableInfo
from airflow_stream_provider.windows.events import WindowEvent

#: FROM omitted: the range starts here (before any row)
EARLIEST = datetime(1970, 1, 1, tzinfo=UTC)
#: TO omitted: the range ends here (after any row the stream can have processed)
LATEST = datetime(2200, 1, 1, tzinfo=UTC)
def verify(warehouse: Warehouse, db: str, name: str, start: datetime | None = None, end: datetime | None = None, *,
           repair: bool = False, store: StreamStore | None = None,
           progress: Callable[[str], None] | None = None, api: AirflowApi | None = None) -> VerifyReport:
    """Verify stream ``db.name`` over ``[start, end)`` (None: from its first row, as far as it has
    processed); with ``repair``, recalculate the windows that differ, remove the extra rows, and
    verify again. The windows are recalculated by a run of the stream's recalculation DAG through
    Airflow's API ``api`` when it runs there (None: here, in this process). StreamError when the
    stream or the range cannot be verified, or the recalculation failed or did not end in time."""
    began = time.monotonic()
    store = store or StreamStore()
    stored = store.get(db, name)
    say = progress or (lambda _msg: None)
    start, end = start or EARLIEST, end or LATEST
    if end <= start:
        raise StreamError(f"VERIFY STREAM {stored.qualified}: TO ({end.isoformat()}) must be after FROM "
                          f"({start.isoformat()})")
    idle = set(stored.statement.options.event_types) & {EventType.IDLE, EventType.RESUME}
    if idle:
        raise StreamError(f"VERIFY STREAM {stored.qualified}: its EVENT_TYPE computes {' and '.join(sorted(idle))} "
                          "events, which processing time decided (IDLE_TIMEOUT) and a batch cannot find again, so "
                          "its output cannot be compared with one")
    if stored.statement.series is not None:
        report = verify_cq.verify(warehouse, stored, store, start, end, repair=repair, say=say)
    else:
        with in_database(warehouse, stored.db):
            report, expected = _verify(warehouse, stored, store, start, end, say)
            if repair and report.differences:
                first = report
                if isinstance(expected, _Notified):
                    removed, recalculated = 0, verify_notify.repair(expected.runtime, stored, expected.events, first,
                                                                    say)
                else:
                    removed, recalculated = _repair(stored, store, expected, first, api, say)
                report, _ = _verify(warehouse, stored, store, start, end, say)
                report.repaired, report.removed, report.repair = first.differences, removed, recalculated
    report.seconds = time.monotonic() - began
    say(report.summary())
    return report


# --- what the batch computes ------------------------------------------------------------------------


@dataclass
class _Expected:
    runtime: StreamRuntime
    fired: list[Fired]
    events: list[WindowEvent] | None
    rows: pa.Table | None  # the output rows the triggers give, one per key (the last a trigger gives)
    trigger_of: list[Fired]  # each row's trigger
    info: TableInfo
    horizon: datetime | None = None  # the source's rows before it are gone: its windows are not judged
    expired: int = 0  # triggers left out for that


def _verify(warehouse: Warehouse, stored: StoredStream, store: StreamStore, start: datetime, end: datetime,
            say: Callable[[str], None]) -> tuple[VerifyReport, _Expected | _Notified]:
    state = store.load_state(stored.db, stored.name)
    runtime, fired, events, version, horizon, expired = _triggers(warehouse, stored, state, start, end, say)
    report = VerifyReport(stored.qualified, start, end, triggers=len(fired), version=version, expired=expired,
                          horizon=horizon)
    if verify_notify.notify_only(runtime):
        say(f"computing {len(fired)} trigger(s) of {stored.qualified} in batch")
        return report, _Notified(runtime, verify_notify.verify(runtime, stored, state, fired, events, report, say))
    expected = _expected(warehouse, stored, (runtime, fired, events, version, horizon, expired), say)
    report.rows = expected.rows.num_rows if expected.rows is not None else 0
    actual = _output_in_range(expected, start, end)
    report.compared = actual.num_rows
    report.differences = compare(expected, actual)
    report.differences.sort(key=lambda d: (d.ts, d.table, d.status))
    say(f"compared {report.rows} result rows with {report.compared} output rows")
    return report, expected


@dataclass
class _Notified:
    """What the batch gives a notify-only stream: the notifications carrying results."""

    runtime: StreamRuntime
    events: list[NotifyEvent]


def _expected(warehouse: Warehouse, stored: StoredStream, found: tuple, say: Callable[[str], None]) -> _Expected:
    runtime, fired, events, version, horizon, expired = found
    assert runtime.output_plan is not None
    say(f"computing {len(fired)} trigger(s) of {stored.qualified} in batch")
    info = runtime.output_plan.ensure_table(warehouse.catalog)
    if not fired:
        return _Expected(runtime, fired, events, None, [], info, horizon, expired)
    results, computed = compute_results(runtime, fired, RunReport(stored.qualified))
    written = output_rows(runtime, computed, results)
    if written is None:
        return _Expected(runtime, fired, events, None, [], info, horizon, expired)
    _, rows, idx = written
    by_idx = {f.idx: f for f in computed}
    valid = pc.is_valid(rows[info.columns[0].name])  # a NULL first column is discarded by a run too
    rows, idx = rows.filter(valid), idx.filter(valid)
    schema = info.arrow_schema()  # (the types the output table stores them in, as a run writes them)
    rows = pa.table([rows[f.name].cast(f.type) for f in schema], schema=schema)
    keep = _last_of_each_key(rows, info.key_columns)
    rows = rows.take(keep)
    return _Expected(runtime, fired, events, rows, [by_idx[i] for i in idx.take(keep).to_pylist()], info, horizon,
                     expired)


def _triggers(warehouse: Warehouse, stored: StoredStream, state: StreamState, start: datetime, end: datetime,
              say: Callable[[str], None]) -> tuple[StreamRuntime, list[Fired], list[WindowEvent] | None, int | None,
                                                   datetime | None, int]:
    """The triggers of ``[start, end)`` the stream fired, found again in batch: (its runtime, the
    triggers, their window events, the trigger table's version, the retention horizon, how many
    triggers it left out)."""
    stmt = stored.statement
    runtime = StreamRuntime(warehouse, stmt, stored.db, state.skip_versions, text=stored.text,
                            schema=state.result_schema)
    if runtime.compute is None or (runtime.output_plan is None and stmt.notify is None):
        raise StreamError(f"VERIFY STREAM: {stored.qualified} computes nothing it writes or notifies, so there "
                          "is nothing to compare")
    plan = plan_stream(stmt, stored.db, state)
    assert runtime.info is not None  # a stream with a computation reads a trigger table
    path = str(runtime.info.path)
    events = None
    version: int | None
    if plan.kind is StreamKind.WINDOW:
        version = _detected_version(stored, state)
        if version is None:
            fired: list[Fired] = []
        else:
            check_retained(path, version, stored.qualified)
            found = windows.windows_in_range_locally(runtime, start, end, version, say)
            if found is None:
                fired, events = windows.windows_in_range(runtime, _rows(runtime, path, version, start), start, end,
                                                         version, say)
            else:
                fired, events = found
    elif plan.kind is StreamKind.SLIDING:
        version = runtime.table_version()
        assert version is not None
        check_retained(path, version, stored.qualified)
        # (the instants start where the groups' first rows do, as the stream's own did: not at FROM's default)
        origins = [datetime.fromisoformat(e["origin"]) for e in state.sliding.values() if e.get("origin")]
        first = max(start, min(origins) + timedelta(microseconds=1)) if origins else None
        fired = [] if first is None or first >= end else [
            f for f in schedules.sliding_in_range(runtime, _rows(runtime, path, version, first), first, end, version)
            if _fired_sliding(f, state)]
    elif plan.kind is StreamKind.PERIOD:
        assert isinstance(plan.schedule, Schedule)
        fired = _period_fired(runtime, plan.schedule, state, start, end, path, stored.qualified)
        version = None
    else:
        raise StreamError(f"VERIFY STREAM: {stored.qualified} is a stream without a trigger window (it transforms "
                          "each row as it is written); only window, SLIDING and PERIOD streams are verified")
    horizon = retention.source_horizon(warehouse, stored)
    fired, events, expired = retention.outside(fired, events, horizon)
    if expired:
        assert horizon is not None
        say(retention.skipped_message(stored.qualified, expired, horizon))
    return runtime, fired, events, version, horizon, expired


def _detected_version(stored: StoredStream, state: StreamState) -> int | None:
    """The trigger table's version the windows the stream computed were found up to: the later of
    what a run's own detection recorded and what the batches it consumed had read (a detector
    hosted by the stream node records no version in the stream's state, its runs only consume)."""
    consumed = batch_version(stored.checkpoint, state.consumed_batch) if state.consumed_batch is not None else None
    found = [v for v in (state.detected_version, consumed) if v is not None]
    return max(found) if found else None


def _rows(runtime: StreamRuntime, path: str, version: int, start: datetime):
    assert runtime.info is not None
    rows = runtime.warehouse.spark.read.format("delta").option("versionAsOf", version).load(path) \
        .transform(mapping.renamer(path))
    return rows.where(F.col(f"`{runtime.info.timestamp_column}`") >= F.lit(start))


def _fired_sliding(fired: Fired, state: StreamState) -> bool:
    """Whether the stream has fired this SLIDING instant already (its group's ``last`` mark)."""
    mark = state.sliding.get(fired.group_id, {}).get("last")
    at = fired.values["_tcurrent_ts"]
    return mark is not None and isinstance(at, datetime) and at <= datetime.fromisoformat(mark)


def _period_fired(runtime: StreamRuntime, schedule: Schedule, state: StreamState, start: datetime, end: datetime,
                  path: str, stream: str) -> list[Fired]:
    """The PERIOD instants in ``[start, end)`` the stream has fired, as its runs fired them."""
    if state.last_fired is None:
        return []
    due = list(schedule.instants(max(start, schedule.created) - timedelta(microseconds=1),
                                        min(end - timedelta(microseconds=1), state.last_fired)))
    if not due:
        return []
    prev = schedule.previous(due[0])
    since = version_at(path, prev) if prev is not None and prev > schedule.created else state.created_version
    if state.untreated_version is not None and since is not None:
        since = max(since, state.untreated_version)
    if since is not None:
        check_retained(path, since, stream)
    fired, _ = schedules.fire_instants(runtime, schedule, due, since, RunReport(stream))
    return fired


def check_retained(path: str, version: int, stream: str) -> None:
    """Refuse when the table's files at ``version`` are no longer all there (VACUUM removed them) or
    its log no longer reaches back to it."""
    try:
        table = DeltaTable(path, version=version)
    except Exception as err:  # delta-rs raises several types for a log cleaned up
        raise StreamError(f"VERIFY STREAM {stream}: the trigger table's history no longer reaches version {version} "
                          f"({str(err).splitlines()[0]}); verify a later range") from None
    gone = [uri for uri in table.file_uris() if _local(uri) is not None and not Path(_local(uri) or "").exists()]
    if gone:
        current = DeltaTable(path)
        oldest = _oldest_whole(path, version, current.version())
        raise StreamError(
            f"VERIFY STREAM {stream}: version {version} of the trigger table, which the range needs, was vacuumed "
            f"({len(gone)} of its files are gone), so its rows cannot be read again; "
            + (f"the table's retained history starts at version {oldest}: verify a range the stream processed "
               "since" if oldest is not None else "no earlier version is whole"))


def _oldest_whole(path: str, after: int, last: int) -> int | None:
    for v in range(after + 1, last + 1):
        uris = DeltaTable(path, version=v).file_uris()
        if all(_local(u) is None or Path(_local(u) or "").exists() for u in uris):
            return v
    return None


def _local(uri: str) -> str | None:
    """The local path of a file URI (None: an object store's)."""
    parsed = urlparse(uri)
    if parsed.scheme in ("", "file"):
        return unquote(parsed.path) if parsed.scheme else uri
    return None


def _last_of_each_key(rows: pa.Table, keys: tuple[str, ...]) -> pa.Array:
    """The positions of the last row of each key (a later trigger's row replaces an earlier one)."""
    last: dict[tuple, int] = {}
    for i, key in enumerate(zip(*(rows[k].to_pylist() for k in keys))):
        last[key] = i
    return pa.array(sorted(last.values()), pa.int64())


# --- the comparison -----------------------------------------------------------------------------------


def _output_in_range(expected: _Expected, start: datetime, end: datetime) -> pa.Table:
    """The output table's rows whose timestamp is in ``[start, end)``, and those of the keys the
    triggers give."""
    info = expected.info
    table = DeltaTable(str(info.path)).to_pyarrow_table()
    if table.num_rows == 0:
        return table
    if expected.horizon is not None and expected.horizon > start:  # (rows of windows partly gone: not judged)
        start = expected.horizon
    ts = table[info.columns[0].name]
    unit = pa.timestamp("us", tz="UTC")
    inside = pc.and_(pc.greater_equal(ts, pa.scalar(start, unit).cast(ts.type)),
                     pc.less(ts, pa.scalar(end, unit).cast(ts.type)))
    if expected.rows is not None and expected.rows.num_rows:
        keys = info.key_columns
        wanted = set(zip(*(expected.rows[k].to_pylist() for k in keys)))
        have = list(zip(*(table[k].to_pylist() for k in keys)))
        inside = pc.or_(inside, pa.array([k in wanted for k in have]))
    return table.filter(inside)


def compare(expected: _Expected, actual: pa.Table) -> list[Difference]:
    """The differences between the rows the triggers give and the output's, key by key."""
    info = expected.info
    keys = info.key_columns
    first = info.columns[0].name
    values = [c.name for c in info.columns if c.name not in keys]  # (the tags too)
    mine = _by_key(expected.rows, keys) if expected.rows is not None else {}
    theirs = _by_key(actual, keys)
    trigger_at = {(f.group_id, f.values.get("_twstart") or f.values.get("_tcurrent_ts")): f for f in expected.fired}
    group_of = {_table_of(expected.runtime, f): f.group_id for f in expected.trigger_of}
    found: list[Difference] = []
    for key in mine.keys() | theirs.keys():
        new, old = mine.get(key), theirs.get(key)
        table = _key_table(key, keys, info)
        if new is not None:
            row, position = new
            trig = expected.trigger_of[position]
            trigger_id, gid = trig.trigger_id, trig.group_id
        else:
            row = old[0] if old is not None else {}
            gid = group_of.get(table, "")
            near = trigger_at.get((gid, row.get(first)))
            trigger_id = near.trigger_id if near is not None else ""
        at = row[first]
        if old is None:
            assert new is not None
            found.append(Difference(MISSING, table, at, trigger_id, gid, tuple(values), None,
                                    tuple(new[0].get(c) for c in values), key))
        elif new is None:
            found.append(Difference(EXTRA, table, at, trigger_id, gid, tuple(values),
                                    tuple(old[0].get(c) for c in values), None, key))
        else:
            changed = tuple(c for c in values if not same(new[0].get(c), old[0].get(c)))
            if changed:
                found.append(Difference(DIFFERENT, table, at, trigger_id, gid, changed,
                                        tuple(old[0].get(c) for c in changed), tuple(new[0].get(c) for c in changed),
                                        key))
    return found


def _by_key(rows: pa.Table, keys: tuple[str, ...]) -> dict[tuple, tuple[dict, int]]:
    return {tuple(row[k] for k in keys): (row, i) for i, row in enumerate(rows.to_pylist())}


def _key_table(key: tuple, keys: tuple[str, ...], info: TableInfo) -> str:
    return str(key[keys.index(TBNAME)]) if TBNAME in keys else info.name


def _table_of(runtime: StreamRuntime, fired: Fired) -> str:
    plan = runtime.output_plan
    assert plan is not None
    return runtime.tables.get(fired.group_id, plan.name) if plan.grouped else plan.name


# --- REPAIR ---------------------------------------------------------------------------------------------


def _repair(stored: StoredStream, store: StreamStore, expected: _Expected, found: VerifyReport,
            api: AirflowApi | None, say: Callable[[str], None]) -> tuple[int, RunReport]:
    """Delete the extra rows and recalculate the windows of the missing and different ones, each at
    the version it was verified at, by the recalculation's pipeline: through a run of the stream's
    recalculation DAG when Airflow runs it (:mod:`.verify_repair`), else here; (rows removed, what
    the recalculation did)."""
    wanted = {(d.group_id, d.trigger_id) for d in found.differences if d.status != EXTRA and d.trigger_id}
    dag_id = verify_repair.recalculation_dag(stored, api, say) if api is not None and wanted else None
    if dag_id is None:
        with run_lock(stored), recalculations.running(stored, recalculations.REPAIR, found.start, found.end):
            removed = _remove_extra(expected.info, found, say)
            say(f"recalculating {len(wanted)} window(s) that differ")
            report = _recalculate(stored, store, expected.runtime, expected.fired, expected.events, wanted, say)
        return removed, report
    with run_lock(stored):  # (a row no trigger gives: nothing to recalculate, only to delete)
        removed = _remove_extra(expected.info, found, say)
    assert api is not None
    return removed, verify_repair.through_airflow(stored, api, dag_id, found.start, found.end, wanted, say)


def _remove_extra(info: TableInfo, found: VerifyReport, say: Callable[[str], None]) -> int:
    extra = [d.key for d in found.differences if d.status == EXTRA]
    if extra:
        schema = info.arrow_schema()
        keys = info.key_columns
        table = pa.Table.from_pylist([dict(zip(keys, key)) for key in extra],
                                     schema=pa.schema([schema.field(k) for k in keys]))
        writer.delete_matching(info.path, table)
        say(f"removed {len(extra)} extra row(s)")
    return len(extra)


def _recalculate(stored: StoredStream, store: StreamStore, runtime: StreamRuntime, fired: list[Fired],
                 events: list[WindowEvent] | None, wanted: set[tuple[str, str]],
                 say: Callable[[str], None]) -> RunReport:
    """Run the triggers of ``fired`` whose (group id, trigger id) is in ``wanted`` through the
    recalculation's pipeline (the caller holds the stream's run lock)."""
    chosen = (f for f in fired if (f.group_id, f.trigger_id) in wanted)
    again = [dataclasses.replace(f, idx=i) for i, f in enumerate(chosen)]
    window_events = [f.event for f in again if f.event is not None] if events is not None else None
    report = RunReport(stored.qualified)
    process(runtime, stored, again, window_events, report, None, batched=True, say=say,
            what=f"repair of {stored.qualified}")
    with store.updating(stored.db, stored.name) as saving:
        before = saving.state
        saving.state = before.replace(recalculations=before.recalculations + 1,
                                      recalculated_triggers=before.recalculated_triggers + report.triggers)
    return report


def repair_windows(warehouse: Warehouse, db: str, name: str, start: datetime, end: datetime,
                   wanted: set[tuple[str, str]], *, store: StreamStore | None = None,
                   progress: Callable[[str], None] | None = None) -> RunReport:
    """Recalculate the windows ``wanted`` (group id, trigger id) of VERIFY's range ``[start, end)``,
    found again as VERIFY finds them: what a run of the recalculation DAG does for REPAIR."""
    store = store or StreamStore()
    stored = store.get(db, name)
    say = progress or (lambda _msg: None)
    with in_database(warehouse, stored.db):
        runtime, fired, events, *_ = _triggers(warehouse, stored, store.load_state(db, name), start, end, say)
        found = {(f.group_id, f.trigger_id) for f in fired}
        if wanted - found:
            say(f"{len(wanted - found)} of the {len(wanted)} window(s) to repair are no longer among the triggers "
                "of the range (the trigger table changed since VERIFY): VERIFY again tells what remains")
        say(f"recalculating {len(wanted & found)} window(s) that differ")
        with run_lock(stored):
            return _recalculate(stored, store, runtime, fired, events, wanted, say)


def verify_statement(warehouse: Warehouse, stmt: m.VerifyStream, store: StreamStore | None = None,
                     api: AirflowApi | None = None) -> Result:
    """VERIFY STREAM (VERIFY CQ): the differences as its rows, the summary as its message; a notice
    (exit status 3 from the CLI) when there are differences. REPAIR goes through Airflow's API
    ``api`` (None: the configured one) when it can be reached."""
    now = datetime.now(UTC)
    db = warehouse.database_of(stmt.name)
    report = verify(warehouse, db, stmt.name.name, stmt.start.resolve(now) if stmt.start else None,
                    stmt.end.resolve(now) if stmt.end else None, repair=stmt.repair, store=store,
                    api=(api or AirflowApi()) if stmt.repair else None)
    notices = () if report.equal else (f"VERIFY found {report.counts(report.differences)}",)
    return Result(stmt, report.summary(), table=report.table(), notices=notices)
