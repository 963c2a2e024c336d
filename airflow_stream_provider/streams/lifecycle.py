"""CREATE, DROP, STOP, START and RECALCULATE STREAM.

- CREATE checks everything, creates the output table (and registers it in the shared catalog when
  ``[catalog] register_outputs`` is on), then records the stream; DROP removes the definition and
  progress and keeps the output tables.
- STOP records the stop in the stream's state (so it persists: the node's supervisor stops the
  live detector, and the stream's tasks skip while it lasts) and pauses the stream's DAGs through
  Airflow's API.
- START clears it and unpauses. Data written meanwhile is processed as history; with IGNORE
  UNTREATED it is skipped: the detector never reads the table versions written during the stop,
  and PERIOD's %%trows starts after them.
- RECALCULATE creates a backfill of ``stream__<db>__<name>__recalc`` whose runs call
  :func:`~.recalculate.recalculate` for their event-time slice. When Airflow's API cannot be
  reached it recalculates in this process instead, and says so.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from sqlglot import exp

from airflow_stream_provider import config
from airflow_stream_provider import model as m
from airflow_stream_provider.airflow_api import AirflowApi, AirflowApiError
from airflow_stream_provider.exceptions import StreamDefinitionError, StreamError, did_you_mean
from airflow_stream_provider.plan.ids import stream_dag_ids
from airflow_stream_provider.plan.state import StreamState
from airflow_stream_provider.plan.stream import plan_stream
from airflow_stream_provider.spark.metastore import register_outputs
from airflow_stream_provider.sql.ast import PseudoColumn
from airflow_stream_provider.sql.functions import position_in
from airflow_stream_provider.streams import recalculations, retention
from airflow_stream_provider.streams.probes import progress_time
from airflow_stream_provider.streams.recalculate import recalculate
from airflow_stream_provider.streams.runtime import StreamRuntime, group_id
from airflow_stream_provider.streams.store import StoredStream, StreamStore
from airflow_stream_provider.streams.write import table_names
from airflow_stream_provider.warehouse import Result, Warehouse, WarehouseError
from airflow_stream_provider.warehouse.catalog import TBNAME, SubTable, TableInfo
from airflow_stream_provider.warehouse.metastore import register_table


def create(warehouse: Warehouse, stmt: m.CreateStream, store: StreamStore | None = None) -> Result:
    """CREATE STREAM: check everything, create the output table, then record the stream."""
    store = store or StreamStore()
    db = warehouse.database_of(stmt.name)
    warehouse.catalog.precision(db)  # the database must exist
    name = stmt.name.name.lower()
    _refuse_dag_id_clash(store, db, name)
    if store.exists(db, name):
        if stmt.if_not_exists:
            return Result(stmt, f"exists: stream {db}.{name}")
        raise WarehouseError(f"stream {db}.{name} already exists")
    if stmt.query is not None:
        warehouse.check_path_tables(stmt.query.tree)
    if stmt.rollup_by is not None:
        _check_rollup(warehouse, stmt, db)
    runtime = StreamRuntime(warehouse, stmt, db)
    if stmt.legacy is not None:
        _check_legacy(runtime, store)
    plan = runtime.output_plan
    target = ""
    groups = known_groups(runtime) if stmt.nodelay_create_subtable and plan is not None and plan.grouped else None
    if plan is not None:
        output = plan.ensure_table(warehouse.catalog)
        target = f", output {plan.qualified}"
        if register_outputs():
            register_table(warehouse.spark, output.db, output.name, output.path)
            target += " (registered in the catalog)"
        if groups is not None:
            made = table_names(runtime, {group_id(runtime, g): g for g in groups})
            target += f", {len(made)} output subtable{'s' if len(made) != 1 else ''} created"
    now = datetime.now(UTC)
    table = runtime.trigger_table
    store.create(db, stmt, stmt.text, StreamState(created=now, created_version=runtime.table_version(),
                                                  semantics=stmt.options.semantics or config.tdengine_semantics(),
                                                  result_schema=runtime.schema_json(),
                                                  trigger_table=table.to_state() if table is not None else None))
    trigger = f" on {runtime.found.qualified}" if runtime.found is not None else ""
    warnings = "".join(f"; warning: {w}" for w in retention.create_warnings(warehouse, stmt, db, now))
    return Result(stmt, f"created stream {db}.{name}: {stmt.trigger}{trigger}{target}{warnings}")


#: the tag types whose values ROLLUP BY reads as dotted paths (TDengine 3.4.2)
ROLLUP_TAG_TYPES = ("VARCHAR", "BINARY", "NCHAR")


def _check_rollup(warehouse: Warehouse, stmt: m.CreateStream, db: str) -> None:
    """ROLLUP BY against the catalog: a string tag of a supertable. Its values are checked as paths
    where the rows are read: a subtable whose tag is not a path fails the stream, as TDengine's does
    (SHOW STREAMS), rather than its CREATE."""
    assert stmt.trigger_table is not None and stmt.rollup_by is not None  # the parser's checks
    line, column = position_in("ROLLUP BY", stmt.text, stmt.position)

    def fail(message: str, hint: str | None = None) -> StreamDefinitionError:
        return StreamDefinitionError(message, line=line, column=column, clause="ROLLUP BY", hint=hint)

    found = warehouse.catalog.resolve(stmt.trigger_table, (stmt.trigger_table.db or db).lower(), "trigger table")
    if isinstance(found, SubTable) or not found.is_super:
        kind = "subtable" if isinstance(found, SubTable) else "regular table"
        raise fail(f"ROLLUP BY rolls up a tag of a super table; {found.qualified} is a {kind}")
    tag = found.column(stmt.rollup_by)
    if tag is None or tag.role != "tag":
        raise fail(f"ROLLUP BY {stmt.rollup_by}: {found.qualified} has no tag {stmt.rollup_by}",
                   hint=did_you_mean(stmt.rollup_by, [c.name for c in found.tags]))
    if tag.dtype.name not in ROLLUP_TAG_TYPES:
        raise fail(f"ROLLUP BY {tag.name}: the tag is {tag.dtype}; a rollup path is a VARCHAR or NCHAR tag")


def known_groups(runtime: StreamRuntime) -> list[tuple]:
    """NODELAY_CREATE_SUBTABLE: the groups the trigger table already has, the distinct PARTITION BY
    values (subtable names and tags) of its subtables, from the catalog."""
    if runtime.stmt.rollup_by is not None:  # every path prefix of the subtables' tags
        return [(path,) for path in sorted(runtime.rollup_counts())]
    columns = runtime.group_columns
    value_columns = [c.name for c in columns if c.role not in (TBNAME, "tag")]
    if value_columns:
        raise StreamDefinitionError(
            f"NODELAY_CREATE_SUBTABLE needs the groups at CREATE: PARTITION BY {', '.join(value_columns)} is not a "
            "tag or tbname, so its groups are known only from the rows", clause="NODELAY_CREATE_SUBTABLE",
            hint="partition by tbname or tags, or leave NODELAY_CREATE_SUBTABLE out")
    found, info = runtime.found, runtime.info
    assert info is not None  # PARTITION BY needs a trigger table
    catalog = runtime.warehouse.catalog
    if isinstance(found, SubTable):
        subs = [found]
    elif info.is_super:
        subs = [s for s in (catalog.lookup(m.TableName(n), info.db) for n in catalog.subtables(info))
                if isinstance(s, SubTable)]
    else:
        return [(info.name,)] if columns else []
    groups = {tuple(s.name if c.role == TBNAME else s.tags.get(c.name) for c in columns) for s in subs}
    return sorted(groups, key=lambda t: tuple(str(v) for v in t))


def _check_legacy(runtime: StreamRuntime, store: StreamStore) -> None:
    """The rules of TDengine's engine before 3.3.7 that need the warehouse (reference 003): state,
    event and count windows over a supertable need PARTITION BY tbname, and two streams cannot
    write into one output table (reference 001)."""
    stmt = runtime.stmt
    found, trigger = runtime.found, stmt.trigger
    grouped_by_table = "tbname" in (k.lower() for k in stmt.partition_by)
    if isinstance(trigger, (m.StateWindow, m.EventWindow, m.CountWindow)) and isinstance(found, TableInfo) \
            and found.is_super and not grouped_by_table:
        line, column = position_in(trigger.keyword, stmt.text, stmt.position)
        raise StreamDefinitionError(f"{trigger.keyword} over the supertable {found.qualified} needs PARTITION BY "
                                    "tbname: its windows are per subtable", line=line, column=column,
                                    clause=str(trigger.keyword))
    if isinstance(trigger, m.RowTrigger) and runtime.info is not None and stmt.query is not None:
        first = stmt.query.tree.expressions[0] if isinstance(stmt.query.tree, exp.Select) else None
        body = first.this if isinstance(first, exp.Alias) else first
        ts = runtime.info.timestamp_column
        if not (isinstance(body, exp.Column) and body.name.lower() == ts.lower()
                or isinstance(body, PseudoColumn) and body.name in ("_c0", "_rowts")):
            at = stmt.query.position
            raise StreamDefinitionError(f"a stream without a window writes a row per row of {runtime.info.qualified}, "
                                        f"keyed by its timestamp: select {ts} first", line=at.line if at else None,
                                        column=at.column if at else None, clause="AS")
    if stmt.into is None:
        return
    target = stmt.into.key(runtime.db)
    for db, name in store.names():
        other = store.get(db, name).statement
        if other.into is not None and other.into.key(db) == target:
            raise StreamDefinitionError(f"stream {db}.{name} writes into {stmt.into} already; a stream of TDengine "
                                        "before 3.3.7 needs an output table of its own", clause="INTO")


def _refuse_dag_id_clash(store: StreamStore, db: str, name: str) -> None:
    """Refuse a new stream whose DAG ids another stream already has: Airflow would render one of
    the two, and its per-DAG permissions would cover both."""
    ids = set(stream_dag_ids(db, name))
    for other_db, other in store.names():
        if (other_db, other) != (db, name) and ids & set(stream_dag_ids(other_db, other)):
            raise WarehouseError(f"stream {db}.{name} would have the DAG id {stream_dag_ids(db, name)[0]} of "
                                 f"stream {other_db}.{other}; give it another name")


def drop(warehouse: Warehouse, stmt: m.DropStream, store: StreamStore | None = None) -> Result:
    """DROP STREAM: the definition and progress go; the output tables stay."""
    store = store or StreamStore()
    db = warehouse.database_of(stmt.name)
    name = stmt.name.name.lower()
    if not store.exists(db, name):
        if stmt.if_exists:
            return Result(stmt, "nothing to drop")
        store.get(db, name)  # raises, with a hint
    store.drop(db, name)
    return Result(stmt, f"dropped stream {db}.{name} (its output tables are kept)")


def _target(warehouse: Warehouse, stmt, store: StreamStore):
    """(db, name, runtime) of the stream START/STOP names; None when it does not exist and the
    statement says IF EXISTS (otherwise the lookup raises, with a hint)."""
    db = warehouse.database_of(stmt.name)
    name = stmt.name.name.lower()
    if not store.exists(db, name):
        if stmt.if_exists:
            return None
        store.get(db, name)  # raises
    return db, name, StreamRuntime(warehouse, store.get(db, name).statement, db)


def _set_paused(db: str, name: str, paused: bool, api: AirflowApi | None) -> str:
    """Pause or unpause the stream's DAGs; a note of what happened, for the statement's result."""
    api = api or AirflowApi()
    verb = "paused" if paused else "unpaused"
    try:
        done = [dag for dag in stream_dag_ids(db, name) if api.set_paused(dag, paused)]
    except AirflowApiError as err:
        return f"; its DAGs were not {verb} ({err}); its tasks see the state and act on it"
    return f"; DAGs {verb}: {', '.join(done)}" if done else "; Airflow has not parsed its DAGs yet"


def stop(warehouse: Warehouse, stmt: m.StopStream, store: StreamStore | None = None,
         api: AirflowApi | None = None) -> Result:
    store = store or StreamStore()
    found = _target(warehouse, stmt, store)
    done = "paused" if stmt.verb == "PAUSE" else "stopped"
    if found is None:
        return Result(stmt, f"nothing to {stmt.verb.lower()}")
    db, name, runtime = found
    with store.updating(db, name) as saving:
        if saving.state.stopped:
            return Result(stmt, f"stream {db}.{name} is already {done}")
        saving.state = saving.state.replace(stopped=True, stopped_at=datetime.now(UTC).isoformat(),
                                            stopped_version=runtime.table_version())
    return Result(stmt, f"{done} stream {db}.{name}" + _set_paused(db, name, True, api))


def start(warehouse: Warehouse, stmt: m.StartStream, store: StreamStore | None = None,
          api: AirflowApi | None = None) -> Result:
    store = store or StreamStore()
    found = _target(warehouse, stmt, store)
    done = "resumed" if stmt.verb == "RESUME" else "started"
    if found is None:
        return Result(stmt, f"nothing to {stmt.verb.lower()}")
    db, name, runtime = found
    note = ""
    with store.updating(db, name) as saving:
        state = saving.state
        if not state.stopped:
            return Result(stmt, f"stream {db}.{name} is already running")
        current = runtime.table_version()
        stopped_version = state.stopped_version
        if stmt.ignore_untreated:
            if current is not None and stopped_version is not None and current > stopped_version:
                state = state.replace(skip_versions=(*state.skip_versions, (stopped_version + 1, current)))
                note = f"; table versions {stopped_version + 1}..{current} written while stopped are ignored"
            state = state.replace(untreated_version=current, last_fired=datetime.now(UTC))
        saving.state = state.started()
    return Result(stmt, f"{done} stream {db}.{name}{note}" + _set_paused(db, name, False, api))


def recalculate_statement(warehouse: Warehouse, stmt: m.RecalculateStream, store: StreamStore | None = None,
                          api: AirflowApi | None = None) -> Result:
    """RECALCULATE STREAM: a backfill of the stream's recalculation DAG over [FROM, TO]."""
    store = store or StreamStore()
    db = warehouse.database_of(stmt.name)
    stored = store.get(db, stmt.name.name)
    now = datetime.now(UTC)
    start_at = stmt.start.resolve(now)
    if stmt.end is None and isinstance(stored.statement.trigger, m.CountWindow):
        raise StreamError(f"RECALCULATE STREAM: {stored.qualified} has a COUNT_WINDOW trigger, which needs both "
                          "FROM and TO")
    end_at = stmt.end.resolve(now) if stmt.end is not None else progress_time(stored) or now
    try:
        return Result(stmt, create_recalculation(stored, start_at, end_at, api or AirflowApi()))
    except AirflowApiError as err:
        if err.status is not None:
            raise StreamError(f"RECALCULATE STREAM: Airflow refused the backfill: {err}") from None
        with recalculations.running(stored, recalculations.REQUESTED, start_at, end_at):
            report = recalculate(warehouse, stored.db, stored.name, start_at, end_at, store=store)
        return Result(stmt, f"recalculated here, Airflow not being reachable ({err}): {report.summary()}")


def create_recalculation(stored: StoredStream, start_at: datetime, end_at: datetime, api: AirflowApi) -> str:
    """Create the backfill of ``stored``'s recalculation DAG over ``[start_at, end_at)``; say what
    was created. StreamError when the range or the stream does not allow it, or a recalculation
    still runs; AirflowApiError when Airflow refuses or cannot be reached."""
    if isinstance(stored.statement.trigger, m.PeriodTrigger):
        raise StreamError(f"RECALCULATE STREAM: {stored.qualified} has a PERIOD trigger; scheduled triggers "
                          "are not recalculated (reference: manual recalculation is not supported for PERIOD)")
    if not stored.statement.rows.recalculated_on_request:
        raise StreamError(f"RECALCULATE STREAM: {stored.qualified} is written in TDengine's syntax before 3.3.7, "
                          "which has no RECALCULATE: its windows are recalculated as its options say (IGNORE "
                          "EXPIRED 0, IGNORE UPDATE 0, CONTINUOUS_WINDOW_CLOSE RECALCULATE, and on every delete)")
    if end_at <= start_at:
        raise StreamError(f"RECALCULATE STREAM: TO ({end_at.isoformat()}) must be after FROM ({start_at.isoformat()})")
    dag_id = stream_dag_ids(stored.db, stored.name)[1]
    step = plan_stream(stored.statement, stored.db, StreamState()).recalc_step
    assert step is not None  # (every stream but PERIOD has a recalculation DAG)
    slices = recalculations.backfill_slices(step, config.timezone(), start_at, end_at)
    try:
        # a backfill takes the runs whose data interval starts in [from, to]: stop short of TO
        backfill = api.create_backfill(dag_id, start_at, end_at - timedelta(microseconds=1))
    except AirflowApiError as err:
        if err.status == 409:
            raise StreamError(f"RECALCULATE STREAM: a recalculation of {stored.qualified} is still running "
                              f"(Airflow runs one backfill of {dag_id} at a time); run it again once that one "
                              "completes") from None
        raise
    if slices:
        made = recalculations.request(stored, recalculations.REQUESTED, start_at, end_at, slices=slices,
                                      backfill=str(backfill.get("id")))
    else:  # no run of the DAG begins in the range: the request has nothing to do
        made = recalculations.finished(stored, recalculations.REQUESTED, start_at, end_at)
    return (f"backfill {backfill.get('id')} of {dag_id} created over [{start_at.isoformat()}, {end_at.isoformat()}] "
            f"(recalc_id {made.recalc_id}, {slices} run(s))")
