"""``StreamComputeOperator``: computes and writes what fired, and returns the progress to commit."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from airflow.sdk import BaseOperator
from airflow.sdk.exceptions import AirflowSkipException

from airflow_stream_provider import model as m
from airflow_stream_provider.model.events import StreamKind
from airflow_stream_provider.operators.lineage import StreamLineage
from airflow_stream_provider.timetables.time import utc_datetime

#: a PERIOD run's instant: the end of its data interval
AT_TEMPLATE = "{{ data_interval_end }}"


class StreamComputeOperator(StreamLineage, BaseOperator):
    """Computes and writes what fired: the batches the detector committed (window triggers), the
    run's instant (PERIOD), or the SLIDING instants the event time passed. Returns the progress to
    commit.

    A window stream's compute waits itself (``wait=True``, the DAGs' way): it starts in the
    triggerer with :class:`~airflow_stream_provider.triggers.StreamComputeTrigger`, which waits for
    the detector's next committed batch and has the stream node compute it, ending the task with
    the node's progress: no worker process while the node runs. With ``keep_computing_s`` (the DAGs
    give it to a stream without NOTIFY) the node goes on computing the batches that follow for that
    long, as its detector commits them, recording each round's progress, and the task returns the
    last round's. Without a node, the trigger resumes the task on a worker, which detects and
    computes itself, once. With
    ``wait_task`` it takes the event a :class:`~airflow_stream_provider.sensors.StreamCheckpointSensor`
    returned instead.

    A PERIOD stream's compute (``on_node=True``, the DAGs' way) starts in the triggerer too, with
    :class:`~airflow_stream_provider.triggers.StreamInstantTrigger`: the stream node computes the
    run's instant on its running Spark session and the trigger ends the task with the progress.
    Without a node the task resumes on a worker, which computes the instant itself.

    :param stream: the stream, written ``db.name``.
    :param kind: the stream kind (a StreamKind or its value): ``window``, ``row``, ``period``,
        ``sliding`` or ``resample``; it decides what the task computes.
    :param home: the stream home its definitions, state and tables live in; default None:
        ``$AIRFLOW_STREAM_HOME``, else ``~/airflow-stream``.
    :param wait_task: the task id of the :class:`~airflow_stream_provider.sensors.StreamCheckpointSensor`
        whose event (its XCom) says which batches to compute; default None, no sensor.
    :param wait: for window and row streams without a ``wait_task``: start in the triggerer and wait
        there for the detector's next committed batch, as above; default False.
    :param table: the trigger table (its Delta location), whose new versions have the task detect in
        batch when no live detector runs (with ``wait``); default None, only the detector's commits.
    :param poll_interval: the seconds between the trigger's checks while it waits; default 0.25.
    :param keep_computing_s: with ``wait``, how many seconds the stream node goes on computing the
        batches that follow, recording each round's progress; default 0.0, one round.
    :param on_node: for PERIOD streams: start in the triggerer and have the stream node compute the
        run's instant, as above; default False.
    :param kwargs: the arguments of Airflow's ``BaseOperator`` (``task_id``, ...).
    """

    ui_color = "#e8f1fb"
    #: the run's instant, which the triggerer renders into :class:`StreamInstantTrigger`
    template_fields = ("at",)

    def __init__(self, *, stream: str, kind: StreamKind | str, home: str | None = None, wait_task: str | None = None,
                 wait: bool = False, table: str | None = None, poll_interval: float = 0.25,
                 keep_computing_s: float = 0.0, on_node: bool = False, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        try:
            kind = StreamKind(kind)  # (the enum, or its value as a DAG file or a serialized DAG names it)
        except ValueError:
            raise ValueError(f"kind must be window, row, period, sliding or resample, not {kind!r}") from None
        if wait and (not kind.detected or wait_task):
            raise ValueError("wait=True is for window and row streams without a wait_task")
        if keep_computing_s and not wait:
            raise ValueError("keep_computing_s is for a compute that waits itself (wait=True)")
        if on_node and kind is not StreamKind.PERIOD:
            raise ValueError("on_node is for PERIOD streams (window and row streams wait, wait=True)")
        self.init_stream(stream, home)
        self.kind = kind
        self.wait_task = wait_task
        self.wait = wait
        self.table = table
        self.poll_interval = poll_interval
        self.keep_computing_s = keep_computing_s
        self.on_node = on_node
        self.at = AT_TEMPLATE if on_node else None
        if wait:  # no worker while the stream node computes: the task starts (and mostly ends) in the triggerer
            state_dir, checkpoint = self.stream_paths()
            self.start_in_triggerer("StreamComputeTrigger", state_dir=state_dir, table=table,
                                    poll_interval=poll_interval, checkpoint=checkpoint,
                                    keep_for_s=keep_computing_s)
        elif on_node:  # the node computes the instant: no worker process, no Spark session to start
            state_dir, _ = self.stream_paths()
            self.start_in_triggerer("StreamInstantTrigger", state_dir=state_dir, at=self.at)

    def execute(self, context: Any) -> dict:
        event = None
        if self.kind.detected:
            if self.wait:
                # a stream the node computes itself is waited on too, not skipped at once: the run
                # stays deferred while the node writes every batch, and resumes only for a batch the
                # node committed without computing it, or for new rows once no node hosts the stream
                # (then this task detects and computes). A skip would start the next run at once,
                # and a run a second would do nothing but spin the scheduler and the workers.
                trigger = self.checkpoint_trigger(self.table)
                event = trigger.check()
                if event is None:
                    if self._computed_by_node():
                        self.log.info("the live query on the stream node computes, writes and notifies each "
                                      "batch; this run supervises it, and computes what the node leaves")
                    self.defer(trigger=trigger, method_name="execute_complete")
            elif self.wait_task:
                event = context["ti"].xcom_pull(task_ids=self.wait_task)
            self._skip_if_computed_by_node()
        return self._compute(context, event)

    def execute_complete(self, context: Any, event: dict) -> dict:
        self.raise_on_error(event)
        self.log.info("stream %s: %s", self.stream, event)
        self._skip_if_computed_by_node()
        return self._compute(context, event)

    def _computed_by_node(self) -> bool:
        """The stream is computed in its live detector's batches, and a process (the node) hosts it."""
        from airflow_stream_provider.plan.stream import computed_live
        from airflow_stream_provider.streams.store import detector_hosted

        stored = self.stream_store().get(*self.stream_names())
        return computed_live(stored.statement) and detector_hosted(stored.state_dir)

    def _skip_if_computed_by_node(self) -> None:
        if self._computed_by_node():
            raise AirflowSkipException("the live query on the stream node computes, writes and notifies each "
                                       "batch itself (LOW_LATENCY_CALC, or a legacy AT_ONCE, MAX_DELAY, "
                                       "FORCE_WINDOW_CLOSE or window-less stream); this run only supervises")

    def _compute(self, context: Any, event: dict | None) -> dict:
        from airflow_stream_provider.streams.run import run as run_stream
        from airflow_stream_provider.streams.run_request import RunRequest
        from airflow_stream_provider.streams.runtime import StreamStopped
        from airflow_stream_provider.warehouse.warehouse import Warehouse

        store = self.stream_store()
        db, name = self.stream_names()
        arguments: dict[str, Any] = {}
        if self.kind.detected and event:
            arguments = {"upto_batch": event.get("to_batch"), "detect": event.get("status") == "detect"}
        elif self.kind is StreamKind.PERIOD:
            # (the try: an earlier one left running after its supervisor died does nothing)
            arguments = {"at": utc_datetime(context["data_interval_end"]),
                         "attempt": (context["run_id"], int(context["ti"].try_number))}
        elif self.kind is StreamKind.RESAMPLE:
            # a continuous query: the data interval is its range, the instant after it
            trig = store.get(db, name).statement.trigger
            end_offset = trig.end_offset.to_timedelta() if isinstance(trig, m.ResampleTrigger) else timedelta(0)
            arguments = {"at": utc_datetime(context["data_interval_end"]) + end_offset}
        try:
            request = RunRequest.task(progress=self.log.info, **arguments)
            report = run_stream(Warehouse(), db, name, request, store=store)
        except StreamStopped as err:
            raise AirflowSkipException(str(err)) from None
        self.log.info("%s", report.summary())
        if report.superseded:
            raise AirflowSkipException(report.superseded)
        self.report_trigger_failures(self.log)
        if report.per_trigger:
            self.log.info("computed trigger by trigger: %s", report.per_trigger)
        if report.triggers == 0 and report.skipped:
            raise AirflowSkipException(f"IGNORE_NODATA_TRIGGER: no new rows for {report.skipped} trigger(s)")
        return report.progress
