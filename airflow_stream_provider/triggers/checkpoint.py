"""``CheckpointCommitTrigger``: new window events of a stream.

It fires when the stream's detector has committed a micro-batch past the last one consumed
(``<checkpoint>/commits/<N>`` exists exactly when batch N is committed, in the state folder or on
the object store, its events already appended
to the event table). When no process hosts the live detector (the stream node holds its lock), it
also fires when the trigger table has a Delta version newer than the last detection, so that the
compute task detects in batch.
"""

from __future__ import annotations

from typing import Any

from airflow_stream_provider.triggers.base import CLASSPATH_MODULE, StreamTrigger


class CheckpointCommitTrigger(StreamTrigger):
    """Waits for new window events of a stream (see the module's text).

    :param state_dir: the stream's state folder (``state/<db>/<name>/`` in its home).
    :param table: the trigger table (its Delta location) whose new version fires the trigger when no
        live detector runs; default None, only the detector's commits.
    :param poll_interval: the seconds between checks; default 0.5.
    :param checkpoint: the detector's checkpoint, when it is not ``checkpoint/`` in the state folder
        (on an object store); default None.
    """

    def __init__(self, state_dir: str, table: str | None = None, poll_interval: float = 0.5,
                 checkpoint: str | None = None) -> None:
        super().__init__()
        self.state_dir = str(state_dir)
        self.table = str(table) if table is not None else None
        self.poll_interval = float(poll_interval)
        #: the detector's checkpoint, when it is not ``checkpoint/`` in the state folder (on an object store)
        self.checkpoint = str(checkpoint) if checkpoint is not None else None

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (f"{CLASSPATH_MODULE}.{type(self).__qualname__}",
                {"state_dir": self.state_dir, "table": self.table, "poll_interval": self.poll_interval,
                 "checkpoint": self.checkpoint})

    def check(self) -> dict | None:
        from airflow_stream_provider.streams.probes import check_windows

        return check_windows(self.state_dir, self.table, self.checkpoint)
