"""``EventTimeTrigger``: the event time of a SLIDING stream's trigger table passes an instant.

It reads the table's latest event time from Delta's file statistics and fires when that minus
WATERMARK reaches the instant.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Any

from airflow_stream_provider.triggers.base import CLASSPATH_MODULE, StreamTrigger


class EventTimeTrigger(StreamTrigger):
    """Waits until the trigger table's event time minus ``watermark_s`` reaches ``instant``.

    :param state_dir: the stream's state folder (``state/<db>/<name>/`` in its home).
    :param table: the trigger table (its Delta location) whose event time is watched.
    :param ts_column: the trigger table's event-time column.
    :param instant: the instant to reach, ISO 8601 text with a time zone (the run's data interval's end).
    :param watermark_s: WATERMARK in seconds, taken off the latest event time; default 0.0.
    :param poll_interval: the seconds between checks; default 1.0.
    """

    def __init__(self, state_dir: str, table: str, ts_column: str, instant: str, watermark_s: float = 0.0,
                 poll_interval: float = 1.0) -> None:
        super().__init__()
        self.state_dir = str(state_dir)
        self.table = str(table)
        self.ts_column = ts_column
        self.instant = instant
        self.watermark_s = float(watermark_s)
        self.poll_interval = float(poll_interval)

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (f"{CLASSPATH_MODULE}.{type(self).__qualname__}",
                {"state_dir": self.state_dir, "table": self.table, "ts_column": self.ts_column,
                 "instant": self.instant, "watermark_s": self.watermark_s, "poll_interval": self.poll_interval})

    def check(self) -> dict | None:
        from airflow_stream_provider.streams.probes import max_event_time, stream_state

        state = stream_state(Path(self.state_dir))
        if state is not None and state.stopped:
            return None
        latest = max_event_time(self.table, self.ts_column)
        if latest is None:
            return None
        if latest.timestamp() - self.watermark_s >= datetime.fromisoformat(self.instant).timestamp():
            return {"status": "passed", "event_time": latest.isoformat(), "instant": self.instant}
        return None
