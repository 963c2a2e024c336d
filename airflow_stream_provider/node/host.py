"""The live detectors a stream node hosts: one per running window stream, the streams a host has on
one trigger table sharing one reader of its change feed
(:class:`~airflow_stream_provider.windows.changes.ChangeFeed`).

Every few seconds the node reconciles what runs with the streams folder: a window stream that
exists and is not stopped gets its detector (CREATE STREAM, START STREAM), and a detector whose
stream was stopped or dropped is stopped (STOP STREAM, DROP STREAM). A detector holds its stream's
detector lock while it runs, so Airflow tasks read its events instead of detecting themselves;
a stream whose lock another process holds is left to that process and tried again later.

A ``LOW_LATENCY_CALC`` stream is also computed, written and notified inside each detector batch,
before the batch commits; its DAG then finds nothing left and only supervises. Its results go first:
the rest of its batch (its events' and checkpoint's commits) waits behind the other streams' batches
expected to report windows. A batch without
events is recorded consumed at once when every batch before it was, so no DAG run wakes for it.

A stream its DAG computes asks the node, from its compute task in Airflow's triggerer, to compute
the batches its detector committed. A stream without NOTIFY asks for a compute that goes on
(``keep_for_s``): the node records each round's progress and computes the next batch as soon as the
detector commits it, with no polling in between, until the task's time is up, and then on until the
stream's next run asks (at most :data:`BETWEEN_RUNS_S`), which tells those rounds in its log.

A PERIOD stream has no detector: its instants come from its DAG's timetable. A host that takes one
holds its lock all the same and answers its tasks' requests: its compute task, started in Airflow's
triggerer, has the node compute each instant on the node's running Spark session instead of
starting a worker process and a Spark session of its own.

Each stream's ``detector.json`` says who hosts its detector, the query's last progress, and the
last error. A failed query is reported there and started again after a pause, from its checkpoint.
"""

from __future__ import annotations

import hashlib
import os
import threading
import time
import traceback
import uuid
import zlib
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession

from airflow_stream_provider import model as m
from airflow_stream_provider.files import write_json
from airflow_stream_provider.notify.delivery import DeliveryPaused
from airflow_stream_provider.plan.stream import StreamKind, computed_live, kind_of, plan_stream
from airflow_stream_provider.streams import node_requests
from airflow_stream_provider.streams.fire import rows
from airflow_stream_provider.streams.fire.windows import detector_options, trigger_plan
from airflow_stream_provider.streams.notifications import deliver
from airflow_stream_provider.streams.run import commit_progress, skip_empty_batch
from airflow_stream_provider.streams.run import run as run_stream
from airflow_stream_provider.streams.runtime import StreamRuntime, StreamStopped
from airflow_stream_provider.streams.store import StoredStream, StreamStore, take_detector_lock
from airflow_stream_provider.warehouse import Warehouse
from airflow_stream_provider.windows import detector
from airflow_stream_provider.windows.changes import FeedRegistry

#: seconds before a failed detector is started again
RETRY_AFTER_S = 15.0
#: requests of the streams' tasks the node works on at once
REQUEST_WORKERS = 4
#: detector batches a host runs at once (``AIRFLOW_STREAM_NODE_BATCH_SLOTS``), the others waiting
#: their turn (:class:`~airflow_stream_provider.windows.detector.Turns`): one per process, as a
#: worker is one per core and a batch waiting for Spark or a receiver hands its turn on
BATCH_SLOTS = 1
#: how long a notify request delivers to an ON_FAILURE_PAUSE receiver that fails before it answers
#: that the messages still wait (the task asks again: its run, and so its stream, waits)
NOTIFY_PATIENCE_S = 30.0
#: the longest pause between two rounds of a compute that goes on: each round waits as long as the
#: one before took, so that on a busy node a round takes more batches, sharing what a round costs
MAX_ROUND_PAUSE_S = 5.0
#: how long the node goes on computing a stream after a compute that goes on has answered, until the
#: stream's next run asks (Airflow ends the task and starts the next run meanwhile, seconds on a busy
#: scheduler); the most a stream whose DAG was paused computes after its last run
BETWEEN_RUNS_S = 30.0
#: the rounds between two runs the next run's log tells, the latest
BETWEEN_RUNS_TOLD = 20


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


def keep_until(key: str, keep_for_s: float, now: float) -> float:
    """When a compute that goes on for ``keep_for_s`` from ``now`` (epoch seconds) ends: at the first
    of the stream's own instants, one every ``keep_for_s`` at a place taken from the stream's name
    (``key``, ``db.name``), once three quarters of ``keep_for_s`` have passed. Streams started
    together then end their runs at different seconds, and the work Airflow does between two runs of
    a stream (ending its task, starting the next run) comes for a few streams at a time instead of
    for all of them at once. A stream's next run, asked within a quarter of ``keep_for_s``, ends
    ``keep_for_s`` after its last."""
    place = int.from_bytes(hashlib.blake2b(key.encode(), digest_size=4).digest(), "big") / 2**32 * keep_for_s
    earliest = now + 0.75 * keep_for_s
    return earliest + (place - earliest) % keep_for_s


def _hosting(query: object) -> str:
    """What the host runs for a stream, as its log says it."""
    return "requests only" if isinstance(query, Requests) else "live detector"


@dataclass
class Hosted:
    stored: StoredStream
    query: detector.LiveDetector | Any  # a row stream's is a Structured Streaming query
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


#: which streams a host takes: (its kind, its db.name) -> yes or no
Selection = Callable[[StreamKind, str], bool]


def every_stream(kind: StreamKind, key: str) -> bool:
    return True


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
                 log: Callable[[str], None] = print, selects: Selection = every_stream) -> None:
        self.session = session
        self.store = store or StreamStore()
        self.log = log
        self.selects = selects
        self.hosted: dict[str, Hosted] = {}
        self.failed_at: dict[str, float] = {}
        self.feeds = FeedRegistry()
        self.workers = ThreadPoolExecutor(REQUEST_WORKERS, thread_name_prefix="stream-request")
        self.turns = detector.Turns(batch_slots())
        #: the computes that go on, each on a thread of its own (they mostly wait for a batch)
        self.keeping: list[threading.Thread] = []

    def wanted(self) -> dict[str, StoredStream]:
        """The streams the node serves (:attr:`StreamKind.served`) that exist and are not stopped."""
        out = {}
        for db, name in self.store.names():
            try:
                stored = self.store.get(db, name)
            except Exception as err:  # a definition that no longer parses: not ours to run
                self.log(f"stream {db}.{name}: cannot read its definition: {err}")
                continue
            kind = kind_of(stored.statement)
            if not kind.served or not self.selects(kind, stored.qualified):
                continue  # (a worker reads the state of its own streams only)
            if plan_stream(stored.statement, db, self.store.load_state(db, name)).paused:
                continue
            out[stored.qualified] = stored
        return out

    def reconcile(self) -> None:
        wanted = self.wanted()
        for key in list(self.hosted):
            hosted = self.hosted[key]
            if key not in wanted or wanted[key].text != hosted.stored.text:
                self._stop(key, "stopped" if key in wanted or hosted.stored.state_dir.exists() else "dropped")
            elif hosted.query.exception() is not None or not hosted.query.isActive:
                self._fail(key, str(hosted.query.exception() or "the query stopped"))
            else:
                self._progress(hosted)
        for key, stored in wanted.items():
            if key in self.hosted or time.monotonic() - self.failed_at.get(key, -RETRY_AFTER_S) < RETRY_AFTER_S:
                continue
            self._start(key, stored)

    def _start(self, key: str, stored: StoredStream) -> None:
        fd = take_detector_lock(stored)
        if fd is None:
            return  # a task is detecting right now; try on the next round
        # a warehouse of the stream's own, on the node's session: the streams' batches run at once,
        # each on its query's thread, and a warehouse holds a current database and temporary views
        try:
            state = self.store.load_state(stored.db, stored.name)
            runtime = self.runtime(stored, state)
            query: Any
            batches = Batches()
            if isinstance(stored.statement.trigger, m.PeriodTrigger):  # no detector: its instants are its DAG's
                query = Requests()
            elif isinstance(stored.statement.trigger, m.RowTrigger):
                query = rows.start(runtime, stored, detector_options(stored, state), available_now=False,
                                   interval="250 milliseconds", after_batch=self._consumed(stored))
            else:
                query = detector.LiveDetector(
                    self.window_detector(stored, runtime, detector_options(stored, state), batches),
                    name=key, turns=self.turns, on_batch=batches.done).start()
        except Exception as err:
            os.close(fd)
            self.failed_at[key] = time.monotonic()
            _report(stored.detector_path, {"host": "node", "pid": os.getpid(), "status": "failed",
                                           "error": f"{type(err).__name__}: {err}",
                                           "at": datetime.now(UTC).isoformat()})
            self.log(f"stream {key}: the detector did not start: {err}\n{traceback.format_exc()}")
            return
        self.hosted[key] = Hosted(stored, query, fd, runtime, batches=batches)
        self.failed_at.pop(key, None)
        self.log(f"stream {key}: {_hosting(query)} started ({query.id})")
        self._progress(self.hosted[key])

    def runtime(self, stored: StoredStream, state: dict) -> StreamRuntime:
        """The stream resolved for its detector's batches, on a warehouse of its own over the host's
        session: the streams' batches run at once, each on its detector's thread, and a warehouse
        holds a current database and temporary views."""
        return StreamRuntime(Warehouse(spark=self.session, database=stored.db), stored.statement, stored.db,
                             state.get("skip_versions", ()), text=stored.text, schema=state.get("result_schema"))

    def window_detector(self, stored: StoredStream, runtime: StreamRuntime, options: detector.DetectorOptions,
                        batches: Batches | None = None) -> detector.Detector:
        """A window stream's detector, on the host's reader of its trigger table. Streams computed in
        place (LOW_LATENCY_CALC, legacy AT_ONCE and MAX_DELAY) compute what each batch fires right
        there; the others leave it to their DAG (and tell ``batches`` of each batch they write)."""
        plan = trigger_plan(runtime)
        live = computed_live(stored.statement)
        after = self._low_latency(stored, runtime) if live else self._detected(stored, batches)
        return detector.Detector(plan, options, feed=self.feeds.get(plan.path), after_batch=after, results_first=live)

    def _low_latency(self, stored: StoredStream, runtime: StreamRuntime) -> Callable[[detector.DetectedBatch], None]:
        """LOW_LATENCY_CALC: compute, write, notify and commit each batch's windows right in the
        detector's batch, instead of waiting for the DAG's next run. Every batch uses the same
        ``runtime``: the stream is resolved, and its result typed, once per detector."""
        def after(batch: detector.DetectedBatch) -> None:
            if batch.events is None:  # nothing to compute: the batch is consumed, so no sensor wakes for it
                commit_progress(stored.db, stored.name, {"consumed_batch": batch.id}, store=self.store)
                return
            try:
                report = run_stream(runtime.warehouse, stored.db, stored.name, store=self.store,
                                    upto_batch=batch.id, detect=False, runtime=runtime, detected=batch)
            except StreamStopped:
                return  # STOP STREAM came first; the next reconciliation stops this query
            if report.triggers:
                self.log(f"stream {stored.qualified}: batch {batch.id}: {report.summary()}")

        return after

    def _detected(self, stored: StoredStream, batches: Batches | None) -> Callable[[detector.DetectedBatch], None]:
        """A stream its DAG computes: a batch without events is consumed at once when the batches
        before it are, so the DAG's sensor does not wake for it. (With one before it still waiting,
        the run that computes that one consumes this too.)"""
        def after(batch: detector.DetectedBatch) -> None:
            if batches is not None:
                batches.written(batch)
            if batch.events is None:
                skip_empty_batch(self.store, stored, batch.id)

        return after

    def _consumed(self, stored: StoredStream) -> Callable[[int], None]:
        """A row stream's batch is written when it ends: record it consumed."""
        def after(batch_id: int) -> None:
            commit_progress(stored.db, stored.name, {"consumed_batch": batch_id}, store=self.store)

        return after

    def _progress(self, hosted: Hosted) -> None:
        progress = hosted.query.lastProgress
        if progress is not None and not isinstance(progress, dict):  # a Structured Streaming query's
            progress = dict(progress)
        _report(hosted.stored.detector_path, {
            "host": "node", "pid": os.getpid(), "status": "running", "query_id": str(hosted.query.id),
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
        self.log(f"stream {key}: {_hosting(hosted.query)} {why}")

    def _fail(self, key: str, error: str) -> None:
        hosted = self._release(key)
        self.failed_at[key] = time.monotonic()
        _report(hosted.stored.detector_path, {"host": "node", "pid": os.getpid(), "status": "failed",
                                              "error": error[:2000], "at": datetime.now(UTC).isoformat()})
        self.log(f"stream {key}: live detector failed, restarting from its checkpoint in {RETRY_AFTER_S:.0f}s: "
                 f"{error.splitlines()[0] if error else ''}")

    def stop_all(self) -> None:
        self.workers.shutdown(wait=True, cancel_futures=True)
        for key in list(self.hosted):
            self._stop(key, "stopped")
        for thread in self.keeping:  # (each ends once its round does: its stream is no longer hosted)
            thread.join(60.0)

    # --- what the streams' tasks ask of the node --------------------------------------------------

    def serve_requests(self) -> int:
        """Take the requests the hosted streams' tasks left (:mod:`~airflow_stream_provider.streams.node_requests`)
        and start working on them; how many were taken."""
        taken = 0
        now = time.monotonic()
        for hosted in list(self.hosted.values()):
            if hosted.runtime is None or computed_live(hosted.stored.statement):  # (its own batches compute it)
                continue
            # a folder whose time has not changed holds no new request (looked into anyway every
            # second: two requests within one tick of the file system's clock share a time)
            changed = node_requests.changed(hosted.stored.state_dir)
            if changed == hosted.requests_seen and now - hosted.requests_read < 1.0:
                continue
            hosted.requests_seen, hosted.requests_read = changed, now
            for request, body in node_requests.waiting(hosted.stored.state_dir):
                if body.get("role") == "compute" and body.get("keep_for_s"):
                    self.keeping = [thread for thread in self.keeping if thread.is_alive()]
                    thread = threading.Thread(target=self._keep_computing, args=(hosted, request, body),
                                              name=f"keep-computing:{hosted.stored.qualified}", daemon=True)
                    self.keeping.append(thread)
                    thread.start()
                else:
                    self.workers.submit(self._answer, hosted, request, body)
                taken += 1
        return taken

    def _answer(self, hosted: Hosted, request: str, body: dict) -> None:
        node_requests.reply(hosted.stored.state_dir, request, self._result(hosted, body))

    def _result(self, hosted: Hosted, body: dict, detected: detector.DetectedBatch | None = None,
                record: bool = False) -> dict:
        """The answer to a request of ``hosted``'s tasks: the work's, or the error that stopped it.
        ``detected``: a compute's last batch as the detector wrote it. ``record``: a compute's
        progress is recorded before the stream's next request is worked on, which computes from it."""
        stored = hosted.stored
        try:
            with hosted.busy:
                result = self._work(hosted, body, detected)
                if record and node_requests.succeeded(result):
                    commit_progress(stored.db, stored.name, result["progress"], store=self.store)
                return result
        except StreamStopped as err:
            return {"status": "skipped", "message": str(err)}
        except DeliveryPaused as err:
            return {"status": "waiting", "message": str(err)}
        except Exception as err:  # the task raises it, and Airflow retries it
            self.log(f"stream {hosted.stored.qualified}: request {body.get('role')} failed: "
                     f"{err}\n{traceback.format_exc()}")
            return {"status": "error", "message": f"{type(err).__name__}: {err}"}

    def _keep_computing(self, hosted: Hosted, request: str, body: dict) -> None:
        """A compute that goes on: compute the batches up to the request's, then, for its
        ``keep_for_s``, up to the stream's own instant about then (:func:`keep_until`), compute the
        batches the detector commits next as soon as it commits them, recording each round's
        progress. The answer tells the rounds, those computed between the stream's last run and this
        one first, for the task's log; every round is recorded, so the run's commit has nothing
        left. Without a batch in the request, the first is waited for, and the answer is
        :data:`~.requests.IDLE` when none comes in time.

        Once it has answered, the node goes on the same way until the stream's next run asks, for
        at most :data:`BETWEEN_RUNS_S`: the stream's batches wait neither for Airflow to end this
        run nor to start the next. A newer request of the stream (its next run, or its trigger
        started again) takes over: this one ends, unanswered if it had not answered yet."""
        stored = hosted.stored
        with hosted.keeping_lock:
            hosted.keeping = request
            rounds = [f"before this run, {line}" for line in hosted.between_runs]
            hosted.between_runs = []
        hosted.batches.committed.set()  # (an earlier one waiting for a batch wakes, and sees it is taken over)
        now = time.time()
        until = time.monotonic() + keep_until(stored.qualified, float(body["keep_for_s"]), now) - now
        checkpoint = body.get("checkpoint")
        try:
            result = self._rounds(hosted, request, body.get("upto_batch"), until, checkpoint, rounds)
        except Exception as err:  # the task fails, and Airflow retries it; the rounds recorded stay
            self.log(f"stream {stored.qualified}: a compute that goes on failed: {err}\n{traceback.format_exc()}")
            result = {"status": "error", "message": f"{type(err).__name__}: {err}"}
        with hosted.keeping_lock:
            mine = hosted.keeping == request
        if not mine:  # taken over: nobody waits for this answer
            node_requests.drop(stored.state_dir, request)
            return
        node_requests.reply(stored.state_dir, request, {**result, "rounds": rounds})
        between: list[str] = []
        if node_requests.succeeded(result):
            try:
                self._rounds(hosted, request, None, time.monotonic() + BETWEEN_RUNS_S, checkpoint, between)
            except Exception as err:  # the next run computes these batches
                self.log(f"stream {stored.qualified}: computing between runs failed: {err}\n"
                         f"{traceback.format_exc()}")
        with hosted.keeping_lock:  # (let go of under the lock: a newer request that took over keeps its place)
            hosted.between_runs = (hosted.between_runs + between)[-BETWEEN_RUNS_TOLD:]
            if hosted.keeping == request:
                hosted.keeping = None

    def _rounds(self, hosted: Hosted, request: str, upto: int | None, until: float, checkpoint: str | None,
                rounds: list[str]) -> dict:
        """Rounds of :meth:`_keep_computing` from batch ``upto`` (None: the next one committed) until
        ``until`` (monotonic), each recorded and told in ``rounds``, each after a pause as long as
        the last took; the last round's answer, with its progress recorded, or
        :data:`~.requests.IDLE` when no batch came. It ends at once when ``request`` is taken over,
        and at a round that fails or computes nothing (IGNORE_NODATA_TRIGGER), with its answer."""
        if upto is None:
            upto = self._next_batch(hosted, request, until, checkpoint)
        result: dict = {"status": node_requests.IDLE}
        while upto is not None:
            hosted.batches.committed.clear()  # a batch committed from now on wakes the wait below
            began = time.monotonic()
            result = self._result(hosted, {"role": "compute", "upto_batch": upto}, hosted.batches.last(upto),
                                  record=True)
            if not node_requests.succeeded(result):
                return result
            rounds.append(f"batches up to {upto}: {result.get('summary', 'done')}")
            if hosted.keeping != request or time.monotonic() >= until:
                break
            pause = min(time.monotonic() - began, MAX_ROUND_PAUSE_S)
            upto = self._next_batch(hosted, request, until, checkpoint, not_before=time.monotonic() + pause)
        return {**result, "progress": {}} if node_requests.succeeded(result) else result

    def _next_batch(self, hosted: Hosted, request: str, until: float, checkpoint: str | None,
                    not_before: float = 0.0) -> int | None:
        """The last batch the stream's detector committed with events not computed yet, once there
        is one and ``not_before`` has passed (None: none before ``until``, the stream is no longer
        hosted here, or ``request`` was taken over)."""
        from airflow_stream_provider.streams.probes import check_windows

        while not hosted.released and hosted.keeping == request:
            now = time.monotonic()
            if now >= not_before:
                found = check_windows(hosted.stored.state_dir, None, checkpoint)
                if found is not None:
                    return int(found["to_batch"])
            if now >= until:
                return None
            wait = min(until - now, 1.0)
            if now < not_before:  # (a commit meanwhile wakes it early; the batch is found once the pause is over)
                wait = min(wait, not_before - now)
            hosted.batches.committed.wait(wait)
            hosted.batches.committed.clear()
        return None

    def _work(self, hosted: Hosted, body: dict, detected: detector.DetectedBatch | None = None) -> dict:
        stored, runtime = hosted.stored, hosted.runtime
        assert runtime is not None
        role = body.get("role")
        if role == "compute":
            at = datetime.fromisoformat(body["at"]) if body.get("at") else None  # a PERIOD run's instant
            attempt = (str(body["attempt"][0]), int(body["attempt"][1])) if body.get("attempt") else None
            # in turn with the detectors' batches, before those waiting: its windows are closed already
            with self.turns.turn(first=True):
                report = run_stream(runtime.warehouse, stored.db, stored.name, store=self.store, at=at,
                                    upto_batch=body.get("upto_batch"), detect=False, commit=False,
                                    runtime=runtime, detected=detected, attempt=attempt)
            return {"status": "done", "progress": report.progress, "summary": report.summary(),
                    "per_trigger": report.per_trigger, "skipped": report.skipped, "triggers": report.triggers}
        if role == "notify":
            delivered = deliver(stored, give_up_after=NOTIFY_PATIENCE_S)
            if delivered is None:
                return {"status": "done", "sent": 0, "dropped": 0, "summary": "no NOTIFY"}
            return {"status": "done", "sent": delivered.sent_events, "dropped": delivered.dropped_events,
                    "summary": delivered.summary()}
        raise ValueError(f"unknown request role {role!r}")

    def queries(self) -> list[dict]:
        """The live detectors as the node's status lists its queries."""
        return [{"id": str(h.query.id), "run_id": str(getattr(h.query, "run_id", "")), "name": f"detector:{key}",
                 "active": h.query.isActive, "last_progress": h.query.lastProgress}
                for key, h in self.hosted.items() if isinstance(h.query, detector.LiveDetector)]
