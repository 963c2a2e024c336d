"""``StreamCheckpointSensor``: new window events of a stream, with :class:`CheckpointCommitTrigger`."""

from __future__ import annotations

from typing import Any

from airflow_stream_provider.sensors.base import StreamSensor
from airflow_stream_provider.triggers.checkpoint import CheckpointCommitTrigger


class StreamCheckpointSensor(StreamSensor):
    """Waits until the stream's detector has committed window events past the last consumed batch
    (or, with no live detector, until the trigger table changed). Deferrable by default.

    :param stream: the stream, written ``db.name``.
    :param home: the stream home its definitions, state and tables live in; default None:
        ``$AIRFLOW_STREAM_HOME``, else ``~/airflow-stream``.
    :param table: the trigger table (its Delta location), whose new version ends the wait when no live
        detector runs; default None, only the detector's commits.
    :param poll_interval: the seconds between checks; default 0.5.
    :param deferrable: wait in the triggerer (True, the default) or poke in reschedule mode (False).
    :param kwargs: the arguments of Airflow's ``BaseSensorOperator`` (``task_id``, ...); ``timeout``
        defaults to a year.
    """

    def __init__(self, *, stream: str, home: str | None = None, table: str | None = None,
                 poll_interval: float = 0.5, deferrable: bool = True, **kwargs: Any) -> None:
        super().__init__(stream=stream, home=home, poll_interval=poll_interval, deferrable=deferrable, **kwargs)
        self.table = table

    def trigger_for(self, context: Any) -> CheckpointCommitTrigger:
        return self.checkpoint_trigger(self.table)
