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

Streams declared in the DAG folder (:class:`StreamProject`) render the same DAGs, once deployed,
and one more, ``streams__<project>__deploy``, while a declaration and the home differ: a deploy task
per such stream (:class:`~airflow_stream_provider.operators.StreamDeployOperator`) every
:data:`DEPLOY_EVERY`. It is a DAG of its own because a stopped stream's DAGs are paused, and a
paused DAG runs nothing.

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
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from airflow.sdk import DAG, BaseOperator
from airflow.sdk.definitions.callback import AsyncCallback
from airflow.sdk.definitions.deadline import DeadlineAlert, DeadlineReference

from airflow_stream_provider import config
from airflow_stream_provider import model as m
from airflow_stream_provider.model.events import StreamKind
from airflow_stream_provider.notifications.receivers import notifier
from airflow_stream_provider.operators import (
    StreamCommitOperator,
    StreamComputeOperator,
    StreamDeployOperator,
    StreamNotifyOperator,
    StreamRecalculateOperator,
)
from airflow_stream_provider.operators.freshness import StreamFreshnessOperator, freshness_deadline_missed
from airflow_stream_provider.operators.retention import StreamRetentionOperator
from airflow_stream_provider.operators.verify import StreamVerifyOperator
from airflow_stream_provider.plan import freshness
from airflow_stream_provider.plan.declaration import StreamDeclaration, read_folder, same_definition
from airflow_stream_provider.plan.ids import CHECK_FRESHNESS_TASK, freshness_dag_id, stream_tag, verify_dag_id
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
    TaskRole.DEPLOY: StreamDeployOperator,
}
#: how often the deploy DAG of a project runs while a declaration and the home differ
DEPLOY_EVERY = timedelta(seconds=30)


def _doc(stored: StoredStream, kind: str, state: StreamState) -> str:
    stmt = stored.statement
    into = f" into `{stmt.into}`" if stmt.into is not None else ""
    declared = f" Declared by the project `{state.declared_by}`." if state.declared_by else ""
    refused = ("\n**Its declaration differs and was refused** (declare `recreate` to apply it):\n\n"
               f"```diff\n{state.refused_diff}\n```\n") if state.refused_diff else ""
    return (f"### Stream `{stored.qualified}` ({kind})\n\n"
            f"Trigger: `{stmt.trigger}`{into}. Created {state.created.isoformat() if state.created else '?'}."
            f"{declared}\n\n```sql\n{stored.text.strip()}\n```\n{refused}")


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
    zone = getattr(schedule.tz, "key", None) or config.timezone_name()
    return kind(schedule.period, schedule.offset, zone, schedule.created, months=schedule.months,
                aligned=schedule.aligned)


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
    fresh = _freshness_dag(stored, state, plan, home, retry)
    if fresh is not None:
        dags.append(fresh)
    return dags


def check_every(bound: freshness.Freshness) -> timedelta:
    """How often a stream's freshness is checked: every half bound, between 10 seconds and 5 minutes."""
    return min(max(bound.bound / 2, timedelta(seconds=10)), timedelta(minutes=5))


def _freshness_dag(stored: StoredStream, state: StreamState, plan: StreamPlan, home: Path,
                   retry: dict[str, Any]) -> DAG | None:
    """The DAG that checks the stream's freshness, when it has a bound: its task fails when the stream
    is late or silent, and the ``on_stale`` notifier of its ``[streams.<db>.<name>]`` table is its
    failure callback. A setting that cannot be read leaves this DAG out, never the stream's others."""
    try:
        bound = freshness.configured(stored.db, stored.name, state)
        named = config.stream_settings(stored.db, stored.name).get("on_stale")
        callback = notifier(str(named)) if named else None
    except Exception:
        log.exception("stream %s: its freshness cannot be read; no freshness DAG", stored.qualified)
        return None
    if bound is None:
        return None
    every = check_every(bound)
    # each check run must succeed before the next is due: Airflow's scheduler marks the deadline
    # missed, and queues its callback, for a check that failed or did not end in time
    deadline = DeadlineAlert(reference=DeadlineReference.DAGRUN_QUEUED_AT, interval=every,
                             name=f"freshness of {stored.qualified}",
                             callback=AsyncCallback(freshness_deadline_missed, kwargs={
                                 "stream": stored.qualified, "notifier": str(named) if named else None}))
    with DAG(freshness_dag_id(stored.db, stored.name), schedule=every, start_date=plan.created, catchup=False,
             max_active_runs=1, is_paused_upon_creation=plan.paused, default_args={**retry, "retries": 0},
             on_failure_callback=callback, deadline=deadline, tags=[*_tags(stored), "freshness"],
             doc_md=_doc(stored, "freshness", state) + f"\nEvery {every}: the check fails when the stream is late "
                    f"(its realtime lag over {bound.bound}) or silent (rows arriving, no window fired for "
                    f"{bound.silence(stored.statement)}).\n",
             description=f"freshness of stream {stored.qualified}, bound {bound.bound}") as dag:
        StreamFreshnessOperator(task_id=CHECK_FRESHNESS_TASK, stream=f"{stored.db}.{stored.name}", home=str(home))
    return dag


def _verifiable(stored: StoredStream, plan: StreamPlan) -> bool:
    """Whether VERIFY STREAM judges the stream: a continuous query, or a window, SLIDING or PERIOD
    stream that writes an output table or notifies its results."""
    stmt = stored.statement
    if stmt.series is not None:
        return True
    writes = stmt.into is not None and not stmt.options.calc_notify_only
    return stmt.query is not None and (writes or stmt.notify is not None) \
        and plan.kind in (StreamKind.WINDOW, StreamKind.SLIDING, StreamKind.PERIOD)


def render_streams(home: Path | None = None) -> dict[str, DAG]:
    """The DAGs of every stream not declared in a DAG folder (:class:`StreamProject` renders those),
    by DAG id."""
    home = Path(home) if home else config.home()
    store = StreamStore(home)
    dags: dict[str, DAG] = {}
    for db, name in store.names():
        try:
            state = store.load_state(db, name)
            if state.declared_by is None:
                dags.update((dag.dag_id, dag) for dag in stream_dags(store.get(db, name), state, home))
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


class StreamProject:
    """Streams declared in the DAG folder, rendered as Airflow DAGs; parsing changes nothing.

    A DAG file says ``globals().update(StreamProject(folder, name="power").dags())``. Each ``.sql``
    file under ``folder`` holds one ``CREATE STREAM`` or ``CREATE CQ`` (a file in a subfolder takes
    the subfolder's name as its database; a ``-- on change: recreate`` line says what to do when it
    differs from the running stream); ``streams`` adds declarations written in Python.

    Once deployed, a declared stream has the DAGs a stream created with ``airflow-stream sql`` has;
    while a declaration and the home differ, ``streams__<name>__deploy`` runs a deploy task for it
    (:func:`airflow_stream_provider.streams.declared.deploy`).

    :param folder: the folder of ``.sql`` declarations; default None: only ``streams``.
    :param name: the project's name: it owns the streams it deployed, and a stream it owns whose
        declaration is gone is stopped (never dropped).
    :param database: the database of a declaration that names none.
    :param streams: declarations written in Python (:meth:`StreamDeclaration.of`).
    :param undeclared: also render the streams no project declares and the retention DAG (the
        provider's DAG file then stays out of the DAG folder); default True.
    :param home: the stream home; default None: ``$AIRFLOW_STREAM_HOME``, else ``~/airflow-stream``.
    """

    def __init__(self, folder: Path | str | None = None, *, name: str, database: str | None = None,
                 streams: tuple[StreamDeclaration, ...] | list[StreamDeclaration] = (), undeclared: bool = True,
                 home: Path | str | None = None) -> None:
        if not re.fullmatch(r"[a-z0-9_]+", name):
            raise ValueError(f"a project name is lower-case letters, digits and _, not {name!r}")
        self.folder = Path(folder) if folder is not None else None
        self.name = name
        self.database = database
        self.streams = tuple(streams)
        self.undeclared = undeclared
        self.home = Path(home) if home else config.home()

    @property
    def deploy_dag_id(self) -> str:
        return f"streams__{self.name}__deploy"

    def declarations(self) -> dict[tuple[str, str], StreamDeclaration]:
        """Every declaration by (db, name); a file that cannot be read is logged and left out."""
        found: dict[tuple[str, str], StreamDeclaration] = {}
        if self.folder is not None:
            read, broken = read_folder(self.folder, database=self.database)
            for path, why in broken.items():
                log.error("stream declaration %s cannot be read: %s", path, why)
            found.update(((d.db, d.name), d) for d in read)
        for declaration in self.streams:
            key = (declaration.db, declaration.name)
            if key in found:
                raise ValueError(f"stream {declaration.qualified} is declared twice: in {found[key].source} and "
                                 f"{declaration.source}")
            found[key] = declaration
        return found

    def dags(self) -> dict[str, DAG]:
        """The DAGs by DAG id: the declared streams', the deploy DAG while something is to deploy,
        and (with ``undeclared``) the other streams' and the retention DAG."""
        store = StreamStore(self.home)
        declared = self.declarations()
        dags = {**render_streams(self.home), **render_retention(self.home)} if self.undeclared else {}
        owned = set(declared)
        for db, name in store.names():
            try:
                if store.load_state(db, name).declared_by == self.name:
                    owned.add((db, name))
            except Exception:
                log.exception("stream %s.%s: its state cannot be read", db, name)
        deploys = []
        for db, name in sorted(owned):
            try:
                state = store.load_state(db, name) if store.exists(db, name) else StreamState()
                stored = store.get(db, name) if store.exists(db, name) else None
                if stored is not None and state.declared_by == self.name:
                    dags.update((dag.dag_id, dag) for dag in stream_dags(stored, state, self.home))
                spec = self._deploy(db, name, declared.get((db, name)), stored, state)
                if spec is not None:
                    deploys.append(spec)
            except Exception:  # one broken stream must not hide the others
                log.exception("declared stream %s.%s cannot be rendered as DAGs", db, name)
        if deploys:
            with DAG(self.deploy_dag_id, schedule=DEPLOY_EVERY, start_date=_EPOCH, catchup=False, max_active_runs=1,
                     is_paused_upon_creation=False, tags=["stream", f"project:{self.name}", "deploy"],
                     description=f"deploys the streams declared in the project {self.name}",
                     doc_md=f"### Deploying the project `{self.name}`\n\nOne task per declared stream that differs "
                            "from the home; a refused change fails its task with the diff.\n") as dag:
                _tasks(tuple(deploys))
            dags[dag.dag_id] = dag
        return dags

    def _deploy(self, db: str, name: str, declaration: StreamDeclaration | None, stored: StoredStream | None,
                state: StreamState) -> TaskSpec | None:
        """The deploy task of a stream, when its declaration and the home differ."""
        common = {"stream": f"{db}.{name}", "home": str(self.home), "project": self.name, "retries": 0}
        if declaration is None:  # gone from the code: stop it, once
            return None if state.stopped else TaskSpec(f"deploy__{db}__{name}", TaskRole.DEPLOY,
                                                       {**common, "text": None})
        if stored is not None and state.refused == declaration.fingerprint:
            return None  # refused already, with the diff: the stream's DAG documents it
        fresh = declaration.freshness.to_json() if declaration.freshness is not None else None
        if stored is not None and same_definition(stored.text, declaration.text) and \
                state.declared_by == self.name and not state.paused_by_code and \
                state.other.get(freshness.STATE_KEY) == fresh:
            return None
        return TaskSpec(f"deploy__{db}__{name}", TaskRole.DEPLOY, {
            **common, "text": declaration.text, "source": declaration.source, "recreate": declaration.recreate,
            "recalculate_from": declaration.recalculate_from.isoformat() if declaration.recalculate_from else None,
            "freshness": fresh})
