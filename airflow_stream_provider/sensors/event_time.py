"""``StreamEventTimeSensor``: a SLIDING run's instant passed in event time, with :class:`EventTimeTrigger`."""

from __future__ import annotations

from datetime import UTC
from typing import Any

from airflow_stream_provider.sensors.base import StreamSensor
from airflow_stream_provider.triggers.event_time import EventTimeTrigger


class StreamEventTimeSensor(StreamSensor):
    """SLIDING: waits until the trigger table's event time minus WATERMARK passes the run's
    instant (its data interval's end). Deferrable by default."""

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
