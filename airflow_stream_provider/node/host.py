"""The live detectors a stream node hosts: one per running window stream, the streams a host has on
one trigger table sharing one reader of its change feed
(:class:`~airflow_stream_provider.windows.changes.ChangeFeed`).

Every few seconds the node reconciles what runs with the streams folder: a window stream that
exists and is not stopped gets its detector (CREATE STREAM, START STREAM), and a detector whose
stream was stopped or dropped is stopped (STOP STREAM, DROP STREAM). A detector holds its stream's
detector lock while it runs, so Airflow tasks read its events instead of detecting themselves;
a stream whose lock another process holds is left to that process and tried again later.

What a hosted stream's batches compute in place, and how its tasks' requests are answered, is
in :mod:`.answers`.

A PERIOD stream has no detector: its instants come from its DAG's timetable. A host that takes one
holds its lock all the same and answers its tasks' requests.

Each stream's ``detector.json`` says who hosts its detector, the query's last progress, and the
last error. A failed query is reported there and started again after a pause, from its checkpoint.
"""

from __future__ import annotations

import logging
import os
import time
import traceback
import uuid
import zlib
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from pyspark.sql import SparkSession

from airflow_stream_provider import config
from airflow_stream_provider import model as m
from airflow_stream_provider.files import write_json
from airflow_stream_provider.model.events import StreamKind
from airflow_stream_provider.node.answers import Answers
from airflow_stream_provider.node.hosted import Batches, Hosted
from airflow_stream_provider.plan.state import StreamState
from airflow_stream_provider.plan.stream import computed_live, detector_engine_of, kind_of, plan_stream
from airflow_stream_provider.streams.fire import rows
from airflow_stream_provider.streams.fire.windows import detector_options, trigger_plan
from airflow_stream_provider.streams.runtime import StreamRuntime
from airflow_stream_provider.streams.store import StoredStream, StreamStore, take_detector_lock
from airflow_stream_provider.warehouse import Warehouse
from airflow_stream_provider.windows import detector
from airflow_stream_provider.windows.changes import FeedRegistry
from airflow_stream_provider.windows.live import HostedQuery, LiveDetector
from airflow_stream_provider.windows.turns import Turns

if TYPE_CHECKING:
    from airflow_stream_provider.node.spark_tables import SparkTables

log = logging.getLogger(__name__)

#: seconds before a failed detector is started again
RETRY_AFTER_S = 15.0
#: detector batches a host runs at once (``AIRFLOW_STREAM_NODE_BATCH_SLOTS``), the others waiting
#: their turn (:class:`~airflow_stream_provider.windows.turns.Turns`): one per process, as a
#: worker is one per core and a batch waiting for Spark or a receiver hands its turn on
BATCH_SLOTS = 1


class Requests:
    """What stands for the query of a stream the host runs none for (a PERIOD stream): it is active
    until stopped, and only its tasks' requests are served."""

    def __init__(self) -> None:
        self.id = uuid.uuid4()
        self.run_id = self.id
        self.isActive = True

    def exception(self) -> BaseException | None:
        return None

    @property
    def lastProgress(self) -> dict | None:
        return None

    def stop(self) -> None:
        self.isActive = False


def _hosting(query: object) -> str:
    """What the host runs for a stream, as its log says it."""
    from airflow_stream_provider.node.spark_tables import SparkMember

    if isinstance(query, SparkMember):
        return "spark detector query"
    return "requests only" if isinstance(query, Requests) else "live detector"


def batch_slots() -> int:
    """``AIRFLOW_STREAM_NODE_BATCH_SLOTS``, else :data:`BATCH_SLOTS`."""
    value = os.environ.get("AIRFLOW_STREAM_NODE_BATCH_SLOTS", "").strip()
    try:
        return int(value) if value else BATCH_SLOTS
    except ValueError:
        raise ValueError(f"AIRFLOW_STREAM_NODE_BATCH_SLOTS is a number of batches, not {value!r}") from None


def _report(path: Path, payload: dict) -> None:
    if not path.parent.exists():  # the stream was dropped
        return
    write_json(path, payload, default=str)


#: which streams a host takes: (its kind, its db.name, its detector engine) -> yes or no
Selection = Callable[[StreamKind, str, str | None], bool]


def every_stream(kind: StreamKind, key: str, engine: str | None) -> bool:
    return True


def node_keeps(kind: StreamKind, key: str, engine: str | None) -> bool:
    """The streams a node with workers hosts itself: the row streams, the PERIOD instants and the
    window streams of the spark engine, which run on its Spark session (the other window streams go
    to its workers)."""
    return kind in (StreamKind.ROW, StreamKind.PERIOD) or engine == "spark"


def slot_of(key: str, slots: int) -> int:
    """The worker a window stream goes to, by its name (``db.name``): the streams on one table are
    spread over the workers, so that many of them use every core (each worker reads the table's
    change feed once for the streams it hosts)."""
    return zlib.crc32(key.encode()) % slots


class DetectorHost:
    """Hosts the live detectors of the streams ``selects`` takes.

    :param session: the Spark session computations fall back to (the node's own), or a callable
        returning one (a worker's Spark Connect session to the node, made when first needed).
    """

    def __init__(self, session: SparkSession | Callable[[], SparkSession], store: StreamStore | None = None,
                 selects: Selection = every_stream, master: str | None = None) -> None:
        self.session = session
        self.store = store or StreamStore()
        self.selects = selects
        #: the node's Spark master, which ``auto`` streams follow (spark on a cluster)
        self.master = master or config.node_master()
        self.spark_tables: SparkTables | None = None  # the spark engine's table queries, made when first needed
        self.engines: dict[str, str | None] = {}  # each wanted stream's engine, as the last reconciliation found it
        self.hosted: dict[str, Hosted] = {}
        self.failed_at: dict[str, float] = {}
        self.feeds = FeedRegistry()
        self.turns = Turns(batch_slots())
        #: the work of the hosted streams: their batches' in place, and their tasks' requests
        self.answers = Answers(self.store, self.turns)

    def wanted(self) -> dict[str, StoredStream]:
        """The streams the node serves (:attr:`StreamKind.served`) that exist and are not stopped."""
        out = {}
        for db, name in self.store.names():
            try:
                stored = self.store.get(db, name)
            except Exception as err:  # a definition that no longer parses: not ours to run
                log.warning("stream %s.%s: cannot read its definition: %s", db, name, err)
                continue
            kind = kind_of(stored.statement)
            try:
                engine = detector_engine_of(stored.statement, self.master)
            except ValueError as err:  # the node's engine setting is wrong: the in-process detector runs
                log.warning("stream %s.%s: %s", db, name, err)
                engine = "in-process"
            if not kind.served or not self.selects(kind, stored.qualified, engine):
                continue  # (a worker reads the state of its own streams only)
            if plan_stream(stored.statement, db, self.store.load_state(db, name)).paused:
                continue
            out[stored.qualified] = stored
            self.engines[stored.qualified] = engine
        return out

    def reconcile(self) -> None:
        wanted = self.wanted()
        for key in list(self.hosted):
            hosted = self.hosted[key]
            if key not in wanted or wanted[key].text != hosted.stored.text or self.engines.get(key) != hosted.engine:
                self._stop(key, "stopped" if key in wanted or hosted.stored.state_dir.exists() else "dropped")
            elif hosted.query.exception() is not None or not hosted.query.isActive:
                self._fail(key, str(hosted.query.exception() or "the query stopped"))
            else:
                self._progress(hosted)
        for key, stored in wanted.items():
            if key in self.hosted or time.monotonic() - self.failed_at.get(key, -RETRY_AFTER_S) < RETRY_AFTER_S:
                continue
            self._start(key, stored)
        if self.spark_tables is not None:
            self.spark_tables.apply()  # (a query restarts once for the streams that joined or left it)

    def _start(self, key: str, stored: StoredStream) -> None:
        fd = take_detector_lock(stored)
        if fd is None:
            return  # a task is detecting right now; try on the next round
        # a warehouse of the stream's own, on the node's session: the streams' batches run at once,
        # each on its query's thread, and a warehouse holds a current database and temporary views
        try:
            state = self.store.load_state(stored.db, stored.name)
            runtime = self.runtime(stored, state)
            query: HostedQuery
            batches = Batches()
            if isinstance(stored.statement.trigger, m.PeriodTrigger):  # no detector: its instants are its DAG's
                query = Requests()
            elif self.engines.get(key) == "spark":
                plan = trigger_plan(runtime)
                after = self.answers.detected(stored, batches)
                query = self._spark_tables().join(key, stored, plan, detector_options(stored, state),
                                                  after, batches.done)
            elif isinstance(stored.statement.trigger, m.RowTrigger):
                query = rows.start(runtime, stored, detector_options(stored, state), available_now=False,
                                   interval="250 milliseconds", after_batch=self.answers.consumed(stored))
            else:
                query = LiveDetector(
                    self.window_detector(stored, runtime, detector_options(stored, state), batches),
                    name=key, turns=self.turns, on_batch=batches.done).start()
        except Exception as err:
            os.close(fd)
            self.failed_at[key] = time.monotonic()
            _report(stored.detector_path, {"host": "node", "pid": os.getpid(), "status": "failed",
                                           "error": f"{type(err).__name__}: {err}",
                                           "at": datetime.now(UTC).isoformat()})
            log.warning("stream %s: the detector did not start: %s\n%s", key, err, traceback.format_exc())
            return
        self.hosted[key] = Hosted(stored, query, fd, runtime, batches=batches, engine=self.engines.get(key))
        self.failed_at.pop(key, None)
        log.info("stream %s: %s started (%s)", key, _hosting(query), query.id)
        self._progress(self.hosted[key])

    def _spark_tables(self) -> SparkTables:
        """The spark engine's table queries, on the host's own Spark session (the node's)."""
        from airflow_stream_provider.node.spark_tables import SparkTables
        from airflow_stream_provider.spark.endpoint import folder

        if self.spark_tables is None:
            session = self.session if isinstance(self.session, SparkSession) else self.session()
            self.spark_tables = SparkTables(session, folder() / "spark-detectors")
        return self.spark_tables

    def runtime(self, stored: StoredStream, state: StreamState) -> StreamRuntime:
        """The stream resolved for its detector's batches, on a warehouse of its own over the host's
        session: the streams' batches run at once, each on its detector's thread, and a warehouse
        holds a current database and temporary views."""
        return StreamRuntime(Warehouse(spark=self.session, database=stored.db), stored.statement, stored.db,
                             state.skip_versions, text=stored.text, schema=state.result_schema)

    def window_detector(self, stored: StoredStream, runtime: StreamRuntime, options: detector.DetectorOptions,
                        batches: Batches | None = None) -> detector.Detector:
        """A window stream's detector, on the host's reader of its trigger table. Streams computed in
        place (LOW_LATENCY_CALC, legacy AT_ONCE and MAX_DELAY) compute what each batch fires right
        there; the others leave it to their DAG (and tell ``batches`` of each batch they write)."""
        plan = trigger_plan(runtime)
        live = computed_live(stored.statement)
        after = self.answers.low_latency(stored, runtime) if live else self.answers.detected(stored, batches)
        return detector.Detector(plan, options, feed=self.feeds.get(plan.path), after_batch=after, results_first=live)

    def _progress(self, hosted: Hosted) -> None:
        progress = hosted.query.lastProgress
        if progress is not None and not isinstance(progress, dict):  # a Structured Streaming query's
            progress = dict(progress)
        _report(hosted.stored.detector_path, {
            "host": "node", "pid": os.getpid(), "status": "running", "query_id": str(hosted.query.id),
            "engine": hosted.engine,
            "started": hosted.started, "at": datetime.now(UTC).isoformat(),
            "last_progress": {k: progress.get(k) for k in ("batchId", "numInputRows", "inputRowsPerSecond",
                                                           "processedRowsPerSecond", "timestamp")}
            if progress else None})

    def _release(self, key: str) -> Hosted:
        """Stop the query of ``key`` and let go of its stream's detector lock."""
        hosted = self.hosted.pop(key)
        hosted.released = True
        hosted.batches.committed.set()  # (a compute that goes on stops waiting)
        try:
            hosted.query.stop()
        finally:
            os.close(hosted.lock_fd)
            self.feeds.forget_unfollowed()
        return hosted

    def _stop(self, key: str, why: str) -> None:
        hosted = self._release(key)
        _report(hosted.stored.detector_path, {"host": None, "status": why, "at": datetime.now(UTC).isoformat()})
        log.info("stream %s: %s %s", key, _hosting(hosted.query), why)

    def _fail(self, key: str, error: str) -> None:
        hosted = self._release(key)
        self.failed_at[key] = time.monotonic()
        _report(hosted.stored.detector_path, {"host": "node", "pid": os.getpid(), "status": "failed",
                                              "error": error[:2000], "at": datetime.now(UTC).isoformat()})
        log.warning("stream %s: live detector failed, restarting from its checkpoint in %.0fs: %s",
                    key, RETRY_AFTER_S, error.splitlines()[0] if error else "")

    def stop_all(self) -> None:
        self.answers.shutdown()
        for key in list(self.hosted):
            self._stop(key, "stopped")
        if self.spark_tables is not None:
            self.spark_tables.stop_all()
        self.answers.join()

    def serve_requests(self) -> int:
        """Take the requests the hosted streams' tasks left and start working on them (:class:`.answers.Answers`);
        how many were taken."""
        return self.answers.serve_requests(list(self.hosted.values()))

    def queries(self) -> list[dict]:
        """The live detectors as the node's status lists its queries."""
        return [{"id": str(h.query.id), "run_id": str(getattr(h.query, "run_id", "")), "name": f"detector:{key}",
                 "active": h.query.isActive, "last_progress": h.query.lastProgress}
                for key, h in self.hosted.items() if isinstance(h.query, LiveDetector) or h.engine == "spark"]
