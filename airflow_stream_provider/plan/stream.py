"""A stream's plan: everything decided once from its definition, as plain data, with no I/O.

:func:`plan_stream` turns a stored ``CREATE STREAM`` and the facts recorded when it was created
(its creation time, its resolved trigger table) into a :class:`StreamPlan`: how it is triggered
(a PERIOD or SLIDING schedule, or a window detector), its DAG ids, the tasks of its DAGs and what
each is given, and the event-time slice of a recalculation run. The DAG renderer turns the plan
into Airflow objects (and is the only place that does); ``airflow-stream run``, the Airflow tasks
and recalculation read the same schedule from it, so they agree on every instant.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from typing import Any

from airflow_stream_provider import config
from airflow_stream_provider import model as m
from airflow_stream_provider.model.events import STREAM_KINDS, StreamKind
from airflow_stream_provider.model.statements import spark_refusal_of
from airflow_stream_provider.plan import ids
from airflow_stream_provider.plan.schedule import ResampleSchedule, Schedule, recalc_step, schedule_of
from airflow_stream_provider.plan.state import StreamState

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
#: how long the compute task of a detected stream without NOTIFY goes on computing the batches that
#: follow its first, recording each round's progress: a busy stream's batches then wait for the
#: stream node, not for Airflow to finish a run and start the next (several seconds at twenty streams).
#: The node ends it at the stream's own instant about then, so that streams end their runs apart,
#: and goes on computing until the next run asks
KEEP_COMPUTING_S = 60.0


class TaskRole(StrEnum):
    """What a task of a stream's DAG does; the renderer picks the operator class by role."""

    WAIT_EVENT_TIME = "wait_event_time"
    COMPUTE = "compute"
    NOTIFY = "notify"
    COMMIT = "commit"
    RECALCULATE = "recalculate"
    DEPLOY = "deploy"


@dataclass(frozen=True)
class TriggerTable:
    """The trigger table as CREATE STREAM resolved it: where its Delta table is and its timestamp
    column as the table names it. Recorded in the stream's state, so that rendering DAGs never opens the catalog."""

    path: str
    ts_column: str

    def to_state(self) -> dict[str, str]:
        return {"path": self.path, "ts_column": self.ts_column}

    @classmethod
    def from_state(cls, value: Mapping[str, Any] | None) -> TriggerTable | None:
        if not value:
            return None
        return cls(str(value["path"]), str(value["ts_column"]))


@dataclass(frozen=True)
class TaskSpec:
    """One task: its id, its role, the keyword arguments its operator gets, and the tasks after it."""

    task_id: str
    role: TaskRole
    args: Mapping[str, Any] = field(default_factory=dict)
    downstream: tuple[str, ...] = ()


@dataclass(frozen=True)
class StreamPlan:
    db: str
    name: str
    statement: m.CreateStream
    kind: StreamKind
    created: datetime
    #: the instants of a PERIOD or SLIDING stream or of a continuous query (None for window streams)
    schedule: Schedule | ResampleSchedule | None
    trigger_table: TriggerTable | None
    dag_id: str
    tasks: tuple[TaskSpec, ...]
    #: the recalculation DAG (None for PERIOD streams, which are not recalculated)
    recalc_dag_id: str | None
    recalc_step: timedelta | None
    recalc_tasks: tuple[TaskSpec, ...]
    paused: bool = False

    @property
    def qualified(self) -> str:
        return f"{self.db}.{self.name}"

    @property
    def watermark(self) -> timedelta:
        wm = self.statement.options.watermark
        return wm.to_timedelta() if wm else timedelta(0)


def kind_of(stmt: m.CreateStream) -> StreamKind:
    """What drives the stream, as its trigger's kind says
    (:data:`~airflow_stream_provider.model.events.STREAM_KINDS`)."""
    return STREAM_KINDS[stmt.trigger.keyword]


def detector_engine_of(stmt: m.CreateStream, master: str) -> str | None:
    """The engine that detects a window stream's windows on a node whose Spark master is
    ``master`` (None: the stream has no detector). ``ENGINE(...)``, else the node's
    (:func:`~airflow_stream_provider.config.detector_engine`); ``auto`` is ``spark`` on a cluster.
    A stream that does not name ``spark`` and uses what the spark engine does not run
    (:func:`spark_refusal_of`) stays on the in-process engine."""
    if kind_of(stmt) is not StreamKind.WINDOW:
        return None
    named = stmt.options.engine or config.detector_engine()
    engine = config.resolve_engine(named, master)
    if engine == "spark" and stmt.options.engine != "spark" and spark_refusal_of(stmt) is not None:
        return "in-process"
    return engine


def computed_live(stmt: m.CreateStream) -> bool:
    """Whether the streaming query computes, writes and notifies each batch itself, where it runs
    (the stream node), leaving the DAG to supervise: the streams whose emit policy computes in the
    batch (:attr:`~airflow_stream_provider.model.EmitPolicy.in_batch`: LOW_LATENCY_CALC, and the
    streams that write at every change or on the wall clock). Only a detected stream has such a
    query: a PERIOD, SLIDING or continuous query stream is computed by its DAG's runs, whatever its
    options."""
    return kind_of(stmt).detected and stmt.emit.in_batch


def plan_stream(stmt: m.CreateStream, db: str, state: StreamState, *, home: str = "") -> StreamPlan:
    """The plan of stream ``db.<stmt.name>`` from its definition and its recorded state.

    :param state: the stream's ``stream.json`` (``created``, ``trigger_table``, ``stopped``).
    :param home: the ``AIRFLOW_STREAM_HOME`` its tasks run in, passed to every task.
    """
    name = stmt.name.name.lower()
    kind = kind_of(stmt)
    created = state.created or _EPOCH
    table = TriggerTable.from_state(state.trigger_table)
    main_id, recalc_id = ids.stream_dag_ids(db, name)
    common = {"stream": f"{db}.{name}", "home": home}
    compute_args: dict[str, Any] = {**common, "kind": str(kind)}
    tasks: list[TaskSpec] = []
    after_compute = ids.NOTIFY_TASK if stmt.notify is not None else ids.COMMIT_TASK
    if kind.detected:
        compute_args.update(wait=True, table=table.path if table else None)
        if stmt.notify is None:  # nothing to deliver between rounds: one run computes for a while
            compute_args["keep_computing_s"] = KEEP_COMPUTING_S
    elif kind is StreamKind.PERIOD:
        compute_args["on_node"] = True
    elif kind is StreamKind.SLIDING:
        watermark = stmt.options.watermark.to_timedelta().total_seconds() if stmt.options.watermark else 0.0
        tasks.append(TaskSpec(ids.WAIT_EVENT_TIME_TASK, TaskRole.WAIT_EVENT_TIME,
                              {**common, "table": table.path if table else "",
                               "ts_column": table.ts_column if table else "", "watermark_s": watermark},
                              (ids.COMPUTE_TASK,)))
    tasks.append(TaskSpec(ids.COMPUTE_TASK, TaskRole.COMPUTE, compute_args, (after_compute,)))
    # a served stream's tasks start in the triggerer, the stream node doing their work
    after = {**common, "from_trigger": True} if kind.served else common
    if stmt.notify is not None:
        tasks.append(TaskSpec(ids.NOTIFY_TASK, TaskRole.NOTIFY, after, (ids.COMMIT_TASK,)))
    tasks.append(TaskSpec(ids.COMMIT_TASK, TaskRole.COMMIT, after))
    recalculated = kind in (StreamKind.WINDOW, StreamKind.SLIDING) and stmt.rows.recalculated_on_request
    return StreamPlan(
        db=db, name=name, statement=stmt, kind=kind, created=created,
        schedule=schedule_of(stmt, created, config.timezone(), state.semantics), trigger_table=table,
        dag_id=main_id, tasks=tuple(tasks),
        recalc_dag_id=recalc_id if recalculated else None,
        recalc_step=recalc_step(stmt) if recalculated else None,
        recalc_tasks=(TaskSpec(ids.RECALCULATE_TASK, TaskRole.RECALCULATE, common),) if recalculated else (),
        paused=state.stopped)
