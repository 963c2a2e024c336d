"""``StreamSensor``: a sensor whose check is its trigger's."""

from __future__ import annotations

from typing import Any

from airflow.sdk import BaseSensorOperator, PokeReturnValue

from airflow_stream_provider.operators.base import StreamTask
from airflow_stream_provider.triggers.base import StreamTrigger


class StreamSensor(StreamTask, BaseSensorOperator):
    """A sensor whose check is its trigger's: checked once at start, then deferred to the triggerer
    (or poked in reschedule mode with ``deferrable=False``). A trigger's error event fails the task.

    :param stream: the stream, written ``db.name``.
    :param home: the stream home its definitions, state and tables live in; None for
        ``$AIRFLOW_STREAM_HOME``, else ``~/airflow-stream``.
    :param poll_interval: the seconds between checks, in the triggerer or as the poke interval.
    :param deferrable: True defers to the triggerer after the first check; False pokes in reschedule
        mode, giving the worker slot back between pokes.
    :param kwargs: the arguments of Airflow's ``BaseSensorOperator`` (``task_id``, ...); ``timeout``
        defaults to a year.
    """

    def __init__(self, *, stream: str, home: str | None, poll_interval: float, deferrable: bool,
                 **kwargs: Any) -> None:
        kwargs.setdefault("timeout", 365 * 24 * 3600)
        super().__init__(poke_interval=poll_interval, mode="poke" if deferrable else "reschedule", **kwargs)
        self.init_stream(stream, home)
        self.poll_interval = poll_interval
        self.deferrable = deferrable

    def trigger_for(self, context: Any) -> StreamTrigger:
        """The trigger that waits for what this sensor waits for, in the run of ``context``."""
        raise TypeError(f"{type(self).__name__} does not name its trigger")

    def execute(self, context: Any) -> Any:
        trigger = self.trigger_for(context)
        found = trigger.check()
        if found is not None:
            return found
        if self.deferrable:
            self.defer(trigger=trigger, method_name="execute_complete")
        return super().execute(context)

    def poke(self, context: Any) -> PokeReturnValue:
        found = self.trigger_for(context).check()
        return PokeReturnValue(is_done=found is not None, xcom_value=found)

    def execute_complete(self, context: Any, event: dict) -> dict:
        self.raise_on_error(event)
        self.log.info("stream %s: %s", self.stream, event)
        return event
