"""The ``spark`` detector engine in the stream node: one Structured Streaming query per trigger
table (:class:`~airflow_stream_provider.windows.spark_detector.SparkTableDetector`) over the
table's streams on that engine, on the node's Spark session (a cluster's executors when the node
drives one).

A stream joins or leaves its table's query (CREATE, DROP, START, STOP STREAM, a change of engine)
by a restart of the query with the new set of streams, once per reconciliation of the node:

1. the query stops, and the table's latest version ``L`` is read;
2. each stream's own checkpoint (the in-process format, which the query keeps up to date batch by
   batch: :mod:`airflow_stream_provider.windows.spark_mirror`) is caught up to ``L`` by the
   in-process detector, on the same checkpoint, events and app id;
3. the query starts on a new checkpoint at ``L``, each stream reading from ``L + 1`` with its
   groups' state as its checkpoint holds it (keyed in the state store by the stream and ``L + 1``,
   so no state of an earlier run is read).

Every version is read once for a stream, by one engine or the other, and every batch of its
checkpoint is committed once (a batch planned and never committed is finished with the same
offset, its events commit skipped when it landed): moving between engines or restarting the query
neither loses nor repeats a window or a notification. A query that fails is reported in each of
its streams' ``detector.json`` and started again after a pause (:mod:`.host`).
"""

from __future__ import annotations

import hashlib
import json
import logging
import shutil
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from airflow_stream_provider.streams.store import StoredStream
from airflow_stream_provider.windows import detector
from airflow_stream_provider.windows.changes import ChangeFeed
from airflow_stream_provider.windows.spark_detector import Member, SparkTableDetector
from airflow_stream_provider.windows.trigger_plan import TriggerPlan

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.streaming import StreamingQuery

log = logging.getLogger(__name__)

#: seconds between two batches of a table's query (0 would start the next as one ends)
EVERY_S = 0.25


@dataclass
class Joined:
    """A stream on its table's query: what its catch-up and its batches need."""

    stored: StoredStream
    plan: TriggerPlan
    options: detector.DetectorOptions
    after: Callable[[detector.DetectedBatch], None] | None
    done: Callable[[detector.BatchReport], None] | None


@dataclass
class Table:
    path: str
    members: dict[str, Joined] = field(default_factory=dict)
    query: StreamingQuery | None = None
    error: str | None = None
    dirty: bool = True
    generation: int = 0
    checkpoint: str | None = None


class SparkMember:
    """What stands for a spark-engine stream's query in the host: its table's query, as the stream
    sees it (active while the query runs or is about to restart with it)."""

    def __init__(self, tables: SparkTables, key: str, path: str) -> None:
        self.tables, self.key, self.path = tables, key, path
        self.id = uuid.uuid4()
        self.run_id = self.id

    @property
    def _table(self) -> Table | None:
        return self.tables.tables.get(self.path)

    @property
    def isActive(self) -> bool:
        table = self._table
        return table is not None and (table.dirty or (table.query is not None and table.query.isActive))

    def exception(self) -> BaseException | None:
        table = self._table
        if table is None:
            return None
        if table.error is not None:
            return RuntimeError(table.error)
        return table.query.exception() if table.query is not None else None

    @property
    def lastProgress(self) -> dict | None:
        table = self._table
        progress = table.query.lastProgress if table is not None and table.query is not None else None
        # as JSON gives it (Spark's progress holds the query's ids as UUIDs), so the status can keep it
        return json.loads(json.dumps(dict(progress), default=str)) if progress is not None else None

    def stop(self) -> None:
        self.tables.leave(self.key, self.path)


class SparkTables:
    """The node's table queries of the spark engine, under ``folder`` (one checkpoint per table)."""

    def __init__(self, session: SparkSession, folder: Path) -> None:
        self.session = session
        self.folder = folder
        self.tables: dict[str, Table] = {}

    def join(self, key: str, stored: StoredStream, plan: TriggerPlan, options: detector.DetectorOptions,
             after: Callable[[detector.DetectedBatch], None] | None = None,
             done: Callable[[detector.BatchReport], None] | None = None) -> SparkMember:
        path = str(plan.path)
        table = self.tables.setdefault(path, Table(path))
        table.members[key] = Joined(stored, plan, options, after, done)
        table.dirty, table.error = True, None
        return SparkMember(self, key, path)

    def leave(self, key: str, path: str) -> None:
        """``key`` leaves its table's query, which stops at once (before the stream's detector lock
        is let go of, so that no other detector writes its checkpoint while the query does) and
        starts again without it at the next :meth:`apply`."""
        table = self.tables.get(path)
        if table is not None and table.members.pop(key, None) is not None:
            self._halt(table)
            table.dirty = True

    def apply(self) -> None:
        """Restart the queries whose streams changed since the last time."""
        for path, table in list(self.tables.items()):
            if not table.dirty:
                continue
            try:
                self._restart(table)
            except Exception as err:
                log.warning("table %s: the spark detector query could not start: %s", path, err)
                self._halt(table)
                table.error = f"{type(err).__name__}: {err}"
            table.dirty = False
            if not table.members:
                self.tables.pop(path, None)

    def _halt(self, table: Table) -> None:
        if table.query is not None:
            table.query.stop()
            table.query = None

    def _restart(self, table: Table) -> None:
        self._halt(table)
        old = table.checkpoint
        if table.members:
            latest = ChangeFeed(table.path).latest()
            latest = -1 if latest is None else latest
            members = [self._caught_up(joined, latest) for joined in table.members.values()]
            table.generation += 1
            place = hashlib.sha1(table.path.encode()).hexdigest()[:16]
            table.checkpoint = str(self.folder / place / f"{table.generation}-{uuid.uuid4().hex[:8]}")
            hooks: dict[str, Any] = {j.plan.stream: (j.after, j.done) for j in table.members.values()}
            query = SparkTableDetector(self.session, table.path, members, table.checkpoint, max(latest, 0), hooks)
            table.query = query.start(every_s=EVERY_S)
            log.info("table %s: spark detector query %s for %s", table.path, table.query.id,
                     ", ".join(sorted(table.members)))
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)

    def _caught_up(self, joined: Joined, latest: int) -> Member:
        """The stream's checkpoint caught up to ``latest`` by the in-process detector, as a member of
        the query reading from the next version."""
        began = time.monotonic()
        found = detector.Detector(joined.plan, joined.options, timeouts=False, after_batch=joined.after)
        found.until = latest
        while (report := found.run_once()) is not None:
            if joined.done is not None:
                joined.done(report)
        log.info("stream %s: caught up to version %s in %.1fs", joined.stored.qualified, latest,
                 time.monotonic() - began)
        return Member(joined.plan, joined.options.events_path, latest + 1, joined.options.skip_versions,
                      mirror=joined.options.checkpoint, seeds={k: v[0] for k, v in found.groups.items()},
                      tag=f"{joined.plan.stream}@{latest + 1}")

    def stop_all(self) -> None:
        for table in self.tables.values():
            self._halt(table)
        self.tables.clear()
