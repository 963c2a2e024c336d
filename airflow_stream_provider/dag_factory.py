"""Streams as Airflow DAGs.

Every stream in the streams folder (``$AIRFLOW_STREAM_HOME/streams``) becomes:

- ``stream__<db>__<name>``: PERIOD streams run on a :class:`PeriodTimetable` (``compute >>
  commit``); SLIDING streams on a :class:`SlidingTimetable` (``wait_for_event_time >> compute >>
  commit``); window streams run continuously (``compute >> commit``, one run at a time),
  ``compute`` deferring to the triggerer until the detector commits new batches. A stream with
  NOTIFY has a ``notify`` task before ``commit``;
- ``stream__<db>__<name>__recalc`` (all but PERIOD streams): a :class:`RecalcTimetable` over event
  time whose runs come only from backfills, each recalculating its slice.

Each DAG carries the stream's SQL as its documentation and tags naming the stream and its trigger.
A stream that cannot be rendered (its definition no longer parses, its trigger table is gone) is
logged with its file and left out; the other streams still render.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta
from pathlib import Path

from airflow.sdk import DAG

from airflow_stream_provider import config
from airflow_stream_provider import model as m
from airflow_stream_provider.airflow_api import stream_dag_ids
from airflow_stream_provider.operators import (
    COMPUTE_TASK,
    NOTIFY_TASK,
    WAIT_EVENT_TIME_TASK,
    StreamCommitOperator,
    StreamComputeOperator,
    StreamEventTimeSensor,
    StreamNotifyOperator,
    StreamRecalculateOperator,
)
from airflow_stream_provider.streams.store import StoredStream, StreamStore
from airflow_stream_provider.timetables import (
    PeriodTimetable,
    RecalcTimetable,
    SlidingTimetable,
)

log = logging.getLogger(__name__)
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
#: task retries: a killed or failed task is rerun, and reruns write the same rows once
RETRIES = 3


def _doc(stored: StoredStream, kind: str, state: dict) -> str:
    stmt = stored.statement
    into = f" into `{stmt.into}`" if stmt.into is not None else ""
    return (f"### Stream `{stored.qualified}` ({kind})\n\n"
            f"Trigger: `{stmt.trigger}`{into}. Created {state.get('created', '?')}.\n\n"
            f"```sql\n{stored.text.strip()}\n```\n")


def _tags(stored: StoredStream) -> list[str]:
    trig = stored.statement.trigger
    return ["stream", f"db:{stored.db}", f"stream:{stored.qualified}", f"trigger:{type(trig).__name__}"]


def stream_dags(stored: StoredStream, state: dict, home: Path) -> list[DAG]:
    """The DAGs of one stream."""
    stmt = stored.statement
    trig = stmt.trigger
    main_id, recalc_id = stream_dag_ids(stored.db, stored.name)
    created = datetime.fromisoformat(state["created"]) if state.get("created") else _EPOCH
    tz = config.timezone_name()
    paused = bool(state.get("stopped"))
    common = {"stream": stored.qualified, "home": str(home)}
    retry = {"retries": RETRIES, "retry_delay": timedelta(seconds=5), "retry_exponential_backoff": True,
             "max_retry_delay": timedelta(minutes=5)}
    table_path, ts_column = _trigger_table(stored, home)
    dags = []
    if isinstance(trig, m.PeriodTrigger):
        schedule = PeriodTimetable(trig.period.to_timedelta(),
                                   trig.offset.to_timedelta() if trig.offset else timedelta(0), tz, created)
        kind = "period"
    elif isinstance(trig, m.SlidingTrigger):
        schedule = SlidingTimetable(trig.sliding.to_timedelta(),
                                    trig.offset.to_timedelta() if trig.offset else timedelta(0), tz, created)
        kind = "sliding"
    else:
        schedule, kind = "@continuous", "window"
    with DAG(main_id, schedule=schedule, start_date=created, catchup=False, max_active_runs=1,
             is_paused_upon_creation=paused, doc_md=_doc(stored, kind, state), tags=_tags(stored),
             description=f"{trig} stream {stored.qualified}", default_args=retry) as dag:
        compute_args = {**common, "kind": kind}
        wait = None
        if kind == "window":
            compute_args.update(wait=True, table=table_path)
        elif kind == "sliding":
            watermark = stmt.options.watermark.to_timedelta().total_seconds() if stmt.options.watermark else 0.0
            wait = StreamEventTimeSensor(task_id=WAIT_EVENT_TIME_TASK, table=table_path or "", ts_column=ts_column,
                                         watermark_s=watermark, retries=RETRIES, **common)
        compute = StreamComputeOperator(task_id=COMPUTE_TASK, **compute_args)
        commit = StreamCommitOperator(task_id="commit", **common)
        if wait is not None:
            wait >> compute
        if stmt.notify is not None:
            compute >> StreamNotifyOperator(task_id=NOTIFY_TASK, **common) >> commit
        else:
            compute >> commit
    dags.append(dag)
    if kind != "period":
        from airflow_stream_provider.streams.control import recalc_step

        step = recalc_step(stmt)
        with DAG(recalc_id, schedule=RecalcTimetable(step, timedelta(0), tz), start_date=_EPOCH, catchup=False,
                 max_active_runs=4, is_paused_upon_creation=False, default_args=retry,
                 doc_md=_doc(stored, "recalculation", state)
                 + "\nRuns come from backfills: `RECALCULATE STREAM`, `airflow backfill create --dag-id "
                   f"{recalc_id} --from-date ... --to-date ...` or the Backfill dialog.\n",
                 tags=[*_tags(stored), "recalculation"],
                 description=f"recalculation of stream {stored.qualified}, {step} per run") as recalc:
            StreamRecalculateOperator(task_id="recalculate", **common)
        dags.append(recalc)
    return dags


def _trigger_table(stored: StoredStream, home: Path) -> tuple[str | None, str]:
    """The trigger table's Delta path and timestamp column, read from the catalog's files."""
    table = stored.statement.trigger_table
    if table is None:
        return None, ""
    from airflow_stream_provider.warehouse.catalog import Catalog, SubTable

    catalog = Catalog(home / "warehouse")
    found = catalog.resolve(table, (table.db or stored.db).lower(), "trigger table")
    info = found.stable if isinstance(found, SubTable) else found
    return str(info.path), info.timestamp_column


def render_streams(home: Path | None = None) -> dict[str, DAG]:
    """Every stream's DAGs by DAG id."""
    home = Path(home) if home else config.home()
    store = StreamStore(home)
    dags: dict[str, DAG] = {}
    for db, name in store.names():
        try:
            stored = store.get(db, name)
            for dag in stream_dags(stored, store.load_state(db, name), home):
                dags[dag.dag_id] = dag
        except Exception:  # one broken stream must not hide the others
            log.exception("stream %s.%s (%s) cannot be rendered as DAGs", db, name, store.definition(db, name))
    return dags
