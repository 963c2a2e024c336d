"""What a stream node's host holds of each stream it hosts (:class:`Hosted`): its query, its
detector lock and the stream resolved once, with what the supervisor (:mod:`.host`) and the answers
to the stream's tasks (:mod:`.answers`) share of it: the detector's batches as they commit
(:class:`Batches`), and the compute that goes on for it.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from datetime import UTC, datetime

from airflow_stream_provider.streams.runtime import StreamRuntime
from airflow_stream_provider.streams.store import StoredStream
from airflow_stream_provider.windows import detector
from airflow_stream_provider.windows.live import HostedQuery


class Batches:
    """A detected stream's batches as a compute that goes on learns of them: woken when the
    detector commits one, which it then computes from the events as the detector wrote them,
    instead of reading them back."""

    def __init__(self) -> None:
        self.committed = threading.Event()
        self._written: detector.DetectedBatch | None = None
        self._last: detector.DetectedBatch | None = None

    def written(self, batch: detector.DetectedBatch) -> None:
        """The detector wrote ``batch`` (its thread, before the batch commits)."""
        self._written = batch

    def done(self, report: detector.BatchReport) -> None:
        """The detector committed the batch it wrote last (its thread)."""
        self._last, self._written = self._written, None
        self.committed.set()

    def last(self, batch_id: int) -> detector.DetectedBatch | None:
        """Batch ``batch_id`` as written, when it is the last one committed."""
        last = self._last
        return last if last is not None and last.id == batch_id else None


@dataclass
class Hosted:
    stored: StoredStream
    query: HostedQuery  # a row stream's is a Structured Streaming query
    lock_fd: int
    runtime: StreamRuntime | None = None  # the stream resolved once, for the work its tasks ask of the node
    started: str = field(default_factory=lambda: datetime.now(UTC).isoformat())
    #: one request of the stream's tasks at a time (a run's compute, then its notify)
    busy: threading.Lock = field(default_factory=threading.Lock)
    requests_seen: int | None = None  # the time of its requests folder when last looked into
    requests_read: float = 0.0  # and when that was (monotonic)
    #: its detector's batches as they commit: a compute that goes on waits for them
    batches: Batches = field(default_factory=Batches)
    #: the request of the compute that goes on for it, if any (a newer request of it takes over),
    #: set and let go of under ``keeping_lock``
    keeping: str | None = None
    keeping_lock: threading.Lock = field(default_factory=threading.Lock)
    #: the rounds computed since the last compute that goes on answered, for the next one to tell
    between_runs: list[str] = field(default_factory=list)
    released: bool = False  # no longer hosted: a compute that goes on ends
    engine: str | None = None  # the detector engine that runs it (None: no detector)
