"""Streams as Airflow DAGs.

Every stream in the streams folder (``$AIRFLOW_STREAM_HOME/streams``) becomes:

- ``stream__<db>__<name>``: PERIOD streams run on a :class:`PeriodTimetable` (``compute >>
  commit``); SLIDING streams on a :class:`SlidingTimetable` (``wait_for_event_time >> compute >>
  commit``); window streams run continuously (``compute >> commit``, one run at a time),
  ``compute`` deferring to the triggerer until the detector commits new batches. A stream with
  NOTIFY has a ``notify`` task before ``commit``;
- ``stream__<db>__<name>__recalc`` (all but PERIOD streams): a :class:`RecalcTimetable` over event
  time whose runs come only from backfills, each recalculating its slice.

And once a database of the home has a retention (``KEEP``, ``SET TTL``), ``airflow_stream__retention``
runs the retention every hour (:func:`render_retention`).

Those are the ids of plain names; :func:`~airflow_stream_provider.plan.ids.stream_dag_ids` gives
any other name a sanitized form with a hash, so that every id is a valid key and no two streams
share one.

Everything is decided by the stream's :class:`~airflow_stream_provider.plan.stream.StreamPlan`;
this module only turns it into DAG and operator objects, and is the only place that does. Rendering
reads the streams folder and nothing else (no catalog, no Spark): Airflow parses DAG files often.
Each DAG carries the stream's SQL as its documentation and tags naming the stream and its trigger.
A stream that cannot be rendered (its definition no longer parses) is logged with its file and
left out; the other streams still render.
"""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from airflow.sdk import DAG, BaseOperator

from airflow_stream_provider import config
from airflow_stream_provider import model as m
from airflow_stream_provider.model.events import StreamKind
from airflow_stream_provider.operators import (
    StreamCommitOperator,
    StreamComputeOperator,
    StreamNotifyOperator,
    StreamRecalculateOperator,
)
from airflow_stream_provider.operators.retention import StreamRetentionOperator
from airflow_stream_provider.operators.verify import StreamVerifyOperator
from airflow_stream_provider.plan.ids import stream_tag, verify_dag_id
from airflow_stream_provider.plan.schedule import ResampleSchedule
from airflow_stream_provider.plan.state import StreamState
from airflow_stream_provider.plan.stream import StreamPlan, TaskRole, TaskSpec, plan_stream
from airflow_stream_provider.sensors import StreamEventTimeSensor
from airflow_stream_provider.streams.store import StoredStream, StreamStore
from airflow_stream_provider.timetables import PeriodTimetable, RecalcTimetable, ResampleTimetable, SlidingTimetable

log = logging.getLogger(__name__)
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
#: task retries: a killed or failed task is rerun, and reruns write the same rows once
RETRIES = 3

#: the operator class of each task role
OPERATORS: dict[TaskRole, type[BaseOperator]] = {
    TaskRole.WAIT_EVENT_TIME: StreamEventTimeSensor,
    TaskRole.COMPUTE: StreamComputeOperator,
    TaskRole.NOTIFY: StreamNotifyOperator,
    TaskRole.COMMIT: StreamCommitOperator,
    TaskRole.RECALCULATE: StreamRecalculateOperator,
}


def _doc(stored: StoredStream, kind: str, state: StreamState) -> str:
    stmt = stored.statement
    into = f" into `{stmt.into}`" if stmt.into is not None else ""
    return (f"### Stream `{stored.qualified}` ({kind})\n\n"
            f"Trigger: `{stmt.trigger}`{into}. Created {state.created.isoformat() if state.created else '?'}.\n\n"
            f"```sql\n{stored.text.strip()}\n```\n")


def _tags(stored: StoredStream) -> list[str]:
    trig = stored.statement.trigger
    return ["stream", f"db:{stored.db}", stream_tag(stored.db, stored.name), f"trigger:{type(trig).__name__}"]


def _tasks(specs: tuple[TaskSpec, ...]) -> None:
    """Instantiate ``specs`` in the DAG being defined, and chain them."""
    made: dict[str, BaseOperator] = {}
    for spec in specs:
        # the plan's arguments are each operator's own keywords, of several types
        kwargs: dict[str, Any] = {"task_id": spec.task_id, **spec.args}
        if spec.role is TaskRole.WAIT_EVENT_TIME:
            kwargs["retries"] = RETRIES
        made[spec.task_id] = OPERATORS[spec.role](**kwargs)
    for spec in specs:
        for after in spec.downstream:
            made[spec.task_id] >> made[after]


def _timetable(plan: StreamPlan) -> PeriodTimetable | SlidingTimetable | ResampleTimetable | str:
    schedule = plan.schedule
    if schedule is None:
        return "@continuous"
    if isinstance(schedule, ResampleSchedule):
        trig = plan.statement.trigger
        assert isinstance(trig, m.ResampleTrigger)
        return ResampleTimetable(schedule.every, schedule.boundary, trig.start_offset.to_timedelta(),
                                 trig.end_offset.to_timedelta(), trig.policy, schedule.created)
    kind = PeriodTimetable if plan.kind is StreamKind.PERIOD else SlidingTimetable
    return kind(schedule.period, schedule.offset, config.timezone_name(), schedule.created)


def _start(plan: StreamPlan) -> tuple[datetime, bool]:
    """The DAG's start date and catch-up: a continuous query starts at its first range and, under
    TIMEOUT POLICY BLOCKED, catches up every instant it missed."""
    schedule, trig = plan.schedule, plan.statement.trigger
    if isinstance(schedule, ResampleSchedule) and isinstance(trig, m.ResampleTrigger):
        return schedule.first - trig.start_offset.to_timedelta(), trig.policy == "BLOCKED"
    return plan.created, False


def stream_dags(stored: StoredStream, state: StreamState, home: Path) -> list[DAG]:
    """The DAGs of one stream, as its plan says."""
    plan = plan_stream(stored.statement, stored.db, state, home=str(home))
    trig = stored.statement.trigger
    retry = {"retries": RETRIES, "retry_delay": timedelta(seconds=5), "retry_exponential_backoff": True,
             "max_retry_delay": timedelta(minutes=5)}
    dags = []
    start_date, catchup = _start(plan)
    with DAG(plan.dag_id, schedule=_timetable(plan), start_date=start_date, catchup=catchup, max_active_runs=1,
             is_paused_upon_creation=plan.paused, doc_md=_doc(stored, str(plan.kind), state), tags=_tags(stored),
             description=f"{trig} stream {stored.qualified}", default_args=retry) as dag:
        _tasks(plan.tasks)
    dags.append(dag)
    if plan.recalc_dag_id is not None and plan.recalc_step is not None:
        step = plan.recalc_step
        with DAG(plan.recalc_dag_id, schedule=RecalcTimetable(step, timedelta(0), config.timezone_name()),
                 start_date=_EPOCH, catchup=False, max_active_runs=4, is_paused_upon_creation=False,
                 default_args=retry, doc_md=_doc(stored, "recalculation", state)
                 + "\nRuns come from backfills: `RECALCULATE STREAM`, `airflow backfill create --dag-id "
                   f"{plan.recalc_dag_id} --from-date ... --to-date ...` or the Backfill dialog.\n",
                 tags=[*_tags(stored), "recalculation"],
                 description=f"recalculation of stream {stored.qualified}, {step} per run") as recalc:
            _tasks(plan.recalc_tasks)
        dags.append(recalc)
    every = config.verify_every()
    if every is not None and _verifiable(stored, plan):
        with DAG(verify_dag_id(stored.db, stored.name), schedule=every, start_date=plan.created, catchup=False,
                 max_active_runs=1, is_paused_upon_creation=plan.paused, default_args=retry,
                 doc_md=_doc(stored, "verification", state) + f"\nVERIFY STREAM every {every}: the task fails, "
                        "naming the differences, when the output is not what the batch computes.\n",
                 tags=[*_tags(stored), "verification"],
                 description=f"verification of stream {stored.qualified}") as verifying:
            StreamVerifyOperator(task_id="verify", stream=f"{stored.db}.{stored.name}", home=str(home),
                                 lookback=config.verify_lookback())
        dags.append(verifying)
    return dags


def _verifiable(stored: StoredStream, plan: StreamPlan) -> bool:
    """Whether VERIFY STREAM judges the stream: a continuous query, or a window, SLIDING or PERIOD
    stream that writes an output table."""
    stmt = stored.statement
    if stmt.series is not None:
        return True
    return stmt.query is not None and stmt.into is not None and not stmt.options.calc_notify_only \
        and plan.kind in (StreamKind.WINDOW, StreamKind.SLIDING, StreamKind.PERIOD)


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


#: the DAG of the retention runs
RETENTION_DAG_ID = "airflow_stream__retention"
#: how often the retention runs
RETENTION_EVERY = timedelta(hours=1)


def render_retention(home: Path | None = None) -> dict[str, DAG]:
    """The retention DAG, when a database of the home's warehouse has a retention: it reads the
    databases' retention records (``<db>/.retention.json``), nothing else."""
    home = Path(home) if home else config.home()
    root = home / "warehouse"
    records = sorted(root.glob("*/.retention.json")) if root.is_dir() else []
    if not any(json.loads(p.read_text(encoding="utf-8")).get("keep_micros") is not None for p in records):
        return {}
    with DAG(RETENTION_DAG_ID, schedule=RETENTION_EVERY, start_date=datetime(2025, 1, 1, tzinfo=UTC), catchup=False,
             max_active_runs=1, is_paused_upon_creation=False, tags=["airflow-stream", "retention"],
             description="KEEP and TTL: old rows deleted, files vacuumed, stream horizons recorded",
             doc_md="Deletes the rows each database's KEEP (TDengine) or TTL (IoTDB) no longer keeps, vacuums the "
                    "tables, and records each stream's source horizon. `airflow-stream retention` runs it once.",
             default_args={"retries": RETRIES, "retry_delay": timedelta(seconds=30)}) as dag:
        StreamRetentionOperator(task_id="expire", home=str(home))
    return {dag.dag_id: dag}
