"""What kind of run a stream run is: one frozen :class:`RunRequest`, made by one named maker per
entry point.

- :meth:`RunRequest.everything`: ``airflow-stream run`` and the tests; detect and compute everything
  pending, then record the progress.
- :meth:`RunRequest.live`: a batch of the node's live detector computed inside that batch
  (LOW_LATENCY_CALC and the legacy triggers), from the events the detector just wrote.
- :meth:`RunRequest.served`: the node answering a stream task's request (a request file's body).
- :meth:`RunRequest.task`: an Airflow task computing on its worker, the node not hosting the stream.

A served or task run returns its progress instead of recording it (``commit=False``): the DAG run's
``commit`` task records it once the notifications are out.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from airflow_stream_provider.streams.runtime import StreamRuntime
from airflow_stream_provider.windows.detector import DetectedBatch


@dataclass(frozen=True, kw_only=True)
class RunRequest:
    """The options of one run of a stream.

    :param now: the instant PERIOD and continuous-query schedules are due against (default: the clock)
    :param batched: compute the fired triggers in one batched query where the stream allows it
    :param progress: where the run says what it does, a line at a time
    :param at: the instant of a PERIOD (or continuous-query) run: only that instant is computed
    :param upto_batch: the last detector batch a sensor reported: the run computes up to it
    :param detect: False when the live detector did the detection and only its events are read
    :param commit: record the progress at the end; False returns it in ``report.progress`` for
        :func:`~airflow_stream_provider.streams.run.commit_progress`, which a later task calls
    :param runtime: the stream resolved by an earlier run of the same process (the node keeps one from
        batch to batch, with its result schema and its groups' output subtables)
    :param detected: the detector batch ``upto_batch`` as the node's detector just wrote it, whose
        events need not be read back
    :param attempt: the Airflow run id and try number computing a PERIOD run's instant ``at``: it is
        recorded with the progress, and a try of a run whose later try committed does nothing
    :param records_read: the run records the rows ``detected`` read (the input rate of SHOW STREAMS):
        the batch is computed inside the detector's, and nothing else records them
    """

    now: datetime | None = None
    batched: bool = True
    progress: Callable[[str], None] | None = None
    at: datetime | None = None
    upto_batch: int | None = None
    detect: bool = True
    commit: bool = True
    runtime: StreamRuntime | None = None
    detected: DetectedBatch | None = None
    attempt: tuple[str, int] | None = None
    records_read: bool = False

    @classmethod
    def everything(cls, *, now: datetime | None = None, batched: bool = True,
                   progress: Callable[[str], None] | None = None) -> RunRequest:
        """Everything pending, detected here, computed and recorded (the CLI's run)."""
        return cls(now=now, batched=batched, progress=progress)

    @classmethod
    def live(cls, batch: DetectedBatch, runtime: StreamRuntime) -> RunRequest:
        """The live detector's batch ``batch``, computed and recorded inside it with the stream the
        detector resolved."""
        return cls(upto_batch=batch.id, detect=False, runtime=runtime, detected=batch, records_read=True)

    @classmethod
    def served(cls, body: dict[str, Any], runtime: StreamRuntime,
               detected: DetectedBatch | None = None) -> RunRequest:
        """A stream task's compute request as the node takes it (``body``: the request file's: the
        batch a sensor reported, a PERIOD run's instant and try); its progress goes back to the task."""
        at = datetime.fromisoformat(body["at"]) if body.get("at") else None
        attempt = (str(body["attempt"][0]), int(body["attempt"][1])) if body.get("attempt") else None
        return cls(at=at, upto_batch=body.get("upto_batch"), detect=False, commit=False, runtime=runtime,
                   detected=detected, attempt=attempt)

    @classmethod
    def task(cls, *, progress: Callable[[str], None] | None = None, at: datetime | None = None,
             upto_batch: int | None = None, detect: bool = True,
             attempt: tuple[str, int] | None = None) -> RunRequest:
        """An Airflow task's compute on its worker: the batch its sensor reported (``detect`` False when
        the detector found it) or its run's instant ``at`` and try; its progress goes to the commit task."""
        return cls(progress=progress, at=at, upto_batch=upto_batch, detect=detect, commit=False, attempt=attempt)
