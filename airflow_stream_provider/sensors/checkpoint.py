"""``StreamCheckpointSensor``: new window events of a stream, with :class:`CheckpointCommitTrigger`."""

from __future__ import annotations

from typing import Any

from airflow_stream_provider.sensors.base import StreamSensor
from airflow_stream_provider.triggers.checkpoint import CheckpointCommitTrigger


class StreamCheckpointSensor(StreamSensor):
    """Waits until the stream's detector has committed window events past the last consumed batch
    (or, with no live detector, until the trigger table changed). Deferrable by default."""

    def __init__(self, *, stream: str, home: str | None = None, table: str | None = None,
                 poll_interval: float = 0.5, deferrable: bool = True, **kwargs: Any) -> None:
        super().__init__(stream=stream, home=home, poll_interval=poll_interval, deferrable=deferrable, **kwargs)
        self.table = table

    def trigger_for(self, context: Any) -> CheckpointCommitTrigger:
        return self.checkpoint_trigger(self.table)
