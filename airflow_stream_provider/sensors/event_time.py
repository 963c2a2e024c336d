"""``StreamEventTimeSensor``: a SLIDING run's instant passed in event time, with :class:`EventTimeTrigger`."""

from __future__ import annotations

from datetime import UTC
from typing import Any

from airflow_stream_provider.sensors.base import StreamSensor
from airflow_stream_provider.triggers.event_time import EventTimeTrigger


class StreamEventTimeSensor(StreamSensor):
    """SLIDING: waits until the trigger table's event time minus WATERMARK passes the run's
    instant (its data interval's end). Deferrable by default.

    :param stream: the stream, written ``db.name``.
    :param table: the trigger table (its Delta location) whose event time is watched.
    :param ts_column: the trigger table's event-time column.
    :param watermark_s: WATERMARK in seconds, taken off the latest event time; default 0.0.
    :param home: the stream home its definitions, state and tables live in; default None:
        ``$AIRFLOW_STREAM_HOME``, else ``~/airflow-stream``.
    :param poll_interval: the seconds between checks; default 1.0.
    :param deferrable: wait in the triggerer (True, the default) or poke in reschedule mode (False).
    :param kwargs: the arguments of Airflow's ``BaseSensorOperator`` (``task_id``, ...); ``timeout``
        defaults to a year.
    """

    def __init__(self, *, stream: str, table: str, ts_column: str, watermark_s: float = 0.0,
                 home: str | None = None, poll_interval: float = 1.0, deferrable: bool = True,
                 **kwargs: Any) -> None:
        super().__init__(stream=stream, home=home, poll_interval=poll_interval, deferrable=deferrable, **kwargs)
        self.table, self.ts_column, self.watermark_s = table, ts_column, watermark_s

    def trigger_for(self, context: Any) -> EventTimeTrigger:
        instant = context["data_interval_end"].astimezone(UTC).isoformat()
        state_dir = self.stream_store().state_dir(*self.stream_names())
        return EventTimeTrigger(str(state_dir), self.table, self.ts_column, instant, self.watermark_s,
                                self.poll_interval)
