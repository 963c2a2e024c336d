"""A detector on a thread of its own (:class:`LiveDetector`), and what the node asks of the query
it runs for a stream (:class:`HostedQuery`), which a live detector answers in Structured Streaming's
words."""

from __future__ import annotations

import contextlib
import threading
import time
import uuid
from collections.abc import Callable
from typing import Protocol

from airflow_stream_provider.windows.detector import BatchReport, Detector
from airflow_stream_provider.windows.turns import Turns


class HostedQuery(Protocol):
    """The query the node runs for a stream: a :class:`LiveDetector`, a row stream's Structured
    Streaming query, or what stands for one where none runs. The node reads its id, whether it is
    active, its error and its last progress, and stops it."""

    @property
    def id(self) -> object: ...

    @property
    def isActive(self) -> bool: ...

    def exception(self) -> BaseException | None: ...

    @property
    def lastProgress(self) -> dict | None: ...

    def stop(self) -> None: ...


class LiveDetector:
    """A :class:`Detector` run by a thread of its own until stopped: a batch as soon as its feed has
    a new version (or a timeout is due), everything waiting in one batch when it is behind; with
    ``turns``, each batch in its turn among the process's detectors.

    It answers what the node asks of a running query: ``id``, ``isActive``, ``exception()``,
    ``lastProgress``, ``stop()``, ``awaitTermination()``. ``on_batch`` is told of each batch once it
    is committed.
    """

    def __init__(self, detector: Detector, *, name: str, idle_s: float = 1.0, turns: Turns | None = None,
                 on_batch: Callable[[BatchReport], None] | None = None) -> None:
        self.detector = detector
        self.name = name
        self.idle_s = idle_s
        self.turns = turns
        self.on_batch = on_batch
        self._stop = threading.Event()
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name=f"detector:{name}", daemon=True)
        self.run_id = str(uuid.uuid4())

    @property
    def id(self) -> str:
        return self.detector.id

    def start(self) -> LiveDetector:
        self.detector.feed.follow()
        self._thread.start()
        return self

    def _run(self) -> None:
        detector = self.detector
        try:
            while not self._stop.is_set():
                with self.turns.turn(expected=detector.expects_windows(), weight=detector.expected_events()) \
                        if self.turns is not None else contextlib.nullcontext():
                    ran = detector.run_once()
                if ran is not None:
                    if self.on_batch is not None:
                        self.on_batch(ran)
                    continue
                wait = self.idle_s
                due = detector.next_timeout()
                if due is not None:
                    wait = max(0.0, min(wait, due - time.time()))
                detector.feed.wait(detector.waits_after(), wait)
        except BaseException as err:  # reported to the host, which starts the stream again later
            self._error = err
        finally:
            detector.feed.unfollow()

    @property
    def isActive(self) -> bool:
        return self._thread.is_alive()

    def exception(self) -> BaseException | None:
        return self._error

    @property
    def lastProgress(self) -> dict | None:
        last = self.detector.last
        return last.progress() if last is not None else None

    def stop(self, timeout: float = 60.0) -> None:
        self._stop.set()
        self.detector.feed.wake()  # if it waits for a version
        self._thread.join(timeout)

    def awaitTermination(self, timeout: float | None = None) -> bool:
        self._thread.join(timeout)
        return not self._thread.is_alive()
