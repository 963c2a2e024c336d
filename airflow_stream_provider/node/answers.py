"""The work a stream node does for the streams it hosts: it answers their tasks' requests
(:mod:`~airflow_stream_provider.streams.node_requests`), and it computes in place the batches of the
streams computed live.

A ``LOW_LATENCY_CALC`` stream is computed, written and notified inside each detector batch,
before the batch commits; its DAG then finds nothing left and only supervises. Its results go first:
the rest of its batch (its events' and checkpoint's commits) waits behind the other streams' batches
expected to report windows. A batch without
events is recorded consumed at once when every batch before it was, so no DAG run wakes for it.

A stream its DAG computes asks the node, from its compute task in Airflow's triggerer, to compute
the batches its detector committed. A stream without NOTIFY asks for a compute that goes on
(``keep_for_s``): the node records each round's progress and computes the next batch as soon as the
detector commits it, with no polling in between, until the task's time is up, and then on until the
stream's next run asks (at most :data:`BETWEEN_RUNS_S`), which tells those rounds in its log.

A PERIOD stream's compute task, started in Airflow's triggerer, has the node compute each instant
on the node's running Spark session instead of starting a worker process and a Spark session of
its own.
"""

from __future__ import annotations

import hashlib
import logging
import threading
import time
import traceback
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor

from airflow_stream_provider.node.hosted import Batches, Hosted
from airflow_stream_provider.notify.delivery import DeliveryPaused
from airflow_stream_provider.plan.stream import computed_live
from airflow_stream_provider.streams import node_requests
from airflow_stream_provider.streams.fire.windows import read_entry
from airflow_stream_provider.streams.notifications import deliver_outbox
from airflow_stream_provider.streams.probes import check_windows
from airflow_stream_provider.streams.run import commit_progress, skip_empty_batch
from airflow_stream_provider.streams.run import run as run_stream
from airflow_stream_provider.streams.run_request import RunRequest
from airflow_stream_provider.streams.runtime import StreamRuntime, StreamStopped
from airflow_stream_provider.streams.store import StoredStream, StreamStore
from airflow_stream_provider.windows import detector
from airflow_stream_provider.windows.turns import Turns

log = logging.getLogger(__name__)

#: requests of the streams' tasks the node works on at once
REQUEST_WORKERS = 4
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


class Answers:
    """The work of a host's streams: their tasks' requests, answered on a pool of threads (a compute
    that goes on, on a thread of its own), and their detectors' batches, each in
    turn with the others in ``turns``."""

    def __init__(self, store: StreamStore, turns: Turns) -> None:
        self.store = store
        self.turns = turns
        self.workers = ThreadPoolExecutor(REQUEST_WORKERS, thread_name_prefix="stream-request")
        #: the computes that go on, each on a thread of its own (they mostly wait for a batch)
        self.keeping: list[threading.Thread] = []

    def shutdown(self) -> None:
        """Take no more requests, and wait for those being answered."""
        self.workers.shutdown(wait=True, cancel_futures=True)

    def join(self, timeout: float = 60.0) -> None:
        """Wait for the computes that go on (each ends once its round does, its stream no longer hosted)."""
        for thread in self.keeping:
            thread.join(timeout)

    # --- what the streams' detectors' batches do --------------------------------------------------

    def low_latency(self, stored: StoredStream, runtime: StreamRuntime) -> Callable[[detector.DetectedBatch], None]:
        """LOW_LATENCY_CALC: compute, write, notify and commit each batch's windows right in the
        detector's batch, instead of waiting for the DAG's next run. Every batch uses the same
        ``runtime``: the stream is resolved, and its result typed, once per detector."""
        def after(batch: detector.DetectedBatch) -> None:
            if batch.events is None:  # nothing to compute: the batch is consumed, so no sensor wakes for it
                commit_progress(stored.db, stored.name, {"consumed_batch": batch.id, **read_entry(batch.rows)},
                                store=self.store)
                return
            try:
                report = run_stream(runtime.warehouse, stored.db, stored.name, RunRequest.live(batch, runtime),
                                    store=self.store)
            except StreamStopped:
                return  # STOP STREAM came first; the next reconciliation stops this query
            if report.triggers:
                log.info("stream %s: batch %s: %s", stored.qualified, batch.id, report.summary())

        return after

    def detected(self, stored: StoredStream, batches: Batches | None) -> Callable[[detector.DetectedBatch], None]:
        """A stream its DAG computes: a batch without events is consumed at once when the batches
        before it are, so the DAG's sensor does not wake for it. (With one before it still waiting,
        the run that computes that one consumes this too.)"""
        def after(batch: detector.DetectedBatch) -> None:
            if batches is not None:
                batches.written(batch)
            if batch.events is None:
                skip_empty_batch(self.store, stored, batch.id, batch.rows)
            elif batch.rows:  # (its run records the rest; the rows read, only the detector knows)
                commit_progress(stored.db, stored.name, read_entry(batch.rows), store=self.store)

        return after

    def consumed(self, stored: StoredStream) -> Callable[[int], None]:
        """A row stream's batch is written when it ends: record it consumed."""
        def after(batch_id: int) -> None:
            commit_progress(stored.db, stored.name, {"consumed_batch": batch_id}, store=self.store)

        return after

    # --- what the streams' tasks ask of the node --------------------------------------------------

    def serve_requests(self, hosted_streams: Iterable[Hosted]) -> int:
        """Take the requests the tasks of ``hosted_streams`` left and start working on them; how many
        were taken."""
        taken = 0
        now = time.monotonic()
        for hosted in hosted_streams:
            if hosted.runtime is None:
                continue
            # a folder whose time has not changed holds no new request (looked into anyway every
            # second: two requests within one tick of the file system's clock share a time)
            changed = node_requests.changed(hosted.stored.state_dir)
            if changed == hosted.requests_seen and now - hosted.requests_read < 1.0:
                continue
            hosted.requests_seen, hosted.requests_read = changed, now
            live = computed_live(hosted.stored.statement)
            for request, body in node_requests.waiting(hosted.stored.state_dir):
                if body.get("role") == "compute" and body.get("keep_for_s") and not live:
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
            log.warning("stream %s: request %s failed: %s\n%s", hosted.stored.qualified, body.get("role"), err,
                        traceback.format_exc())
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
            log.warning("stream %s: a compute that goes on failed: %s\n%s", stored.qualified, err,
                        traceback.format_exc())
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
                log.warning("stream %s: computing between runs failed: %s\n%s", stored.qualified, err,
                            traceback.format_exc())
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
        if role == "compute" and computed_live(stored.statement):
            # its detector's batches compute it; what a run on a worker computed while the node was
            # down is recorded already, and what it queued goes with the run's notify request
            return {"status": "done", "progress": {}, "summary": "computed in its live detector's batches",
                    "per_trigger": None, "skipped": 0, "triggers": 0}
        if role == "compute":
            # in turn with the detectors' batches, before those waiting: its windows are closed already
            with self.turns.turn(first=True):
                report = run_stream(runtime.warehouse, stored.db, stored.name,
                                    RunRequest.served(body, runtime, detected), store=self.store)
            return {"status": "done", "progress": report.progress, "summary": report.summary(),
                    "per_trigger": report.per_trigger, "skipped": report.skipped, "triggers": report.triggers}
        if role == "notify":
            delivered = deliver_outbox(stored, give_up_after=NOTIFY_PATIENCE_S)
            if delivered is None:
                return {"status": "done", "sent": 0, "dropped": 0, "summary": "no NOTIFY"}
            return {"status": "done", "sent": delivered.sent_events, "dropped": delivered.dropped_events,
                    "summary": delivered.summary()}
        raise ValueError(f"unknown request role {role!r}")
