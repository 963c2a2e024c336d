"""Triggers that run a window or PERIOD stream's tasks without a worker: the stream node does the work.

A window stream's DAG run computes the detector batches committed since the last run, delivers the
notifications they queued and records the progress; a PERIOD stream's computes its instant. Their
tasks start in the triggerer (``start_from_trigger``), so a run costs no worker process while the
stream node hosts the stream:

- :class:`StreamComputeTrigger` waits for the next committed batch (as
  :class:`~.checkpoint.CheckpointCommitTrigger`), asks the node to compute it
  (:mod:`airflow_stream_provider.streams.node_requests`) and ends the task with the node's progress as
  its XCom. With ``keep_for_s`` (a stream without NOTIFY) the compute goes on: the node records each
  round's progress and computes each batch the stream's detector commits next as soon as it is
  committed, until that many seconds have passed, so that a stream's batches wait neither for
  Airflow to start the next run nor for a trigger's polling;
- :class:`StreamInstantTrigger` asks the node to compute a PERIOD stream's instant, the run's
  (its data interval's end, which the triggerer renders into it), and ends the task with the node's
  progress;
- :class:`StreamNotifyTrigger` asks the node to deliver the stream's outbox, and asks again while an
  ON_FAILURE_PAUSE receiver refuses it (the run, and so the stream, waits);
- :class:`StreamCommitTrigger` records the progress the run's compute returned.

Without a node hosting the stream (or when it stops before taking a request), a trigger fires a
plain event instead and the task resumes on a worker, which does the same work itself. Each trigger
logs what the node did, so the task's log tells the run's story either way.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from airflow.triggers.base import BaseTrigger, TaskSkippedEvent, TaskSuccessEvent, TriggerEvent

from airflow_stream_provider.hooks import bind
from airflow_stream_provider.plan.state import StreamState
from airflow_stream_provider.streams import node_requests
from airflow_stream_provider.triggers.base import CLASSPATH_MODULE, ERROR

#: how often a trigger looks for the node's answer; one that waits long for it (a compute that goes
#: on answers after tens of seconds) looks less often the longer it waits, down to every
#: MAX_ANSWER_POLL_S
ANSWER_POLL_S = 0.02
MAX_ANSWER_POLL_S = 0.25
#: how often a trigger waiting for an answer looks whether the node still hosts the stream
HOSTING_EVERY_S = 1.0
#: how long a taken request may go unanswered once the node no longer hosts the stream (it stopped
#: while working on it): then the task fails and Airflow retries it
LOST_AFTER_S = 10.0
#: the pause before a notify request is made again while an ON_FAILURE_PAUSE receiver refuses
NOTIFY_RETRY_S = 5.0
#: the event that resumes the task on a worker, which does the work itself
RESUME = "resume"


async def ask_node(state_dir: str, role: str, *, longest_poll_s: float = ANSWER_POLL_S,
                   **arguments: Any) -> dict | None:
    """Ask the node hosting the stream to do ``role`` and wait for its answer, looked for every
    :data:`ANSWER_POLL_S` at first and less often the longer it takes, down to every
    ``longest_poll_s``; None when the node stopped hosting it before taking the request (then the
    caller does the work elsewhere). A request taken by a node process that another one has since
    replaced (the node restarted) is asked again of the new one: the old one can no longer answer,
    the new one never saw it."""
    from airflow_stream_provider.streams.probes import node_host

    folder = Path(state_dir)
    host = await asyncio.to_thread(node_host, folder)
    request = await asyncio.to_thread(node_requests.submit, folder, role, **arguments)
    gone_since: float | None = None
    pause = ANSWER_POLL_S
    looked = time.monotonic()  # when the node's hosting was last looked at
    while True:
        answer = await asyncio.to_thread(node_requests.answer, folder, request)
        if answer is not None:
            return answer
        await asyncio.sleep(pause)
        pause = min(pause * 1.5, longest_poll_s)
        if time.monotonic() - looked < HOSTING_EVERY_S:
            continue
        looked = time.monotonic()
        now = await asyncio.to_thread(node_host, folder)
        if now is not None:
            gone_since = None
            if host is not None and now != host and await asyncio.to_thread(node_requests.taken, folder, request):
                await asyncio.to_thread(node_requests.drop, folder, request)
                request = await asyncio.to_thread(node_requests.submit, folder, role, **arguments)
                pause = ANSWER_POLL_S
            host = now
        elif await asyncio.to_thread(node_requests.withdraw, folder, request):
            return None
        elif gone_since is None:
            gone_since = time.monotonic()
        elif time.monotonic() - gone_since > LOST_AFTER_S:
            return {"status": ERROR, "message": f"the stream node stopped while it worked on the {role} request"}


class StreamComputeTrigger(BaseTrigger):
    """Waits for the stream's next committed detector batch and has the stream node compute it (see
    the module's text); fires a plain event for a worker when no node hosts the stream.

    :param state_dir: the stream's state folder (``state/<db>/<name>/`` in its home).
    :param table: the trigger table (its Delta location) whose new version fires a detection when no
        live detector runs; default None, only the detector's commits.
    :param poll_interval: the seconds between checks for a committed batch; default 0.5.
    :param checkpoint: the detector's checkpoint, when it is not ``checkpoint/`` in the state folder
        (on an object store); default None.
    :param keep_for_s: how many seconds the node goes on computing the batches that follow, recording
        each round's progress; default 0.0, one round once a batch is committed.
    """

    def __init__(self, state_dir: str, table: str | None = None, poll_interval: float = 0.5,
                 checkpoint: str | None = None, keep_for_s: float = 0.0) -> None:
        super().__init__()
        self.state_dir = str(state_dir)
        self.table = str(table) if table is not None else None
        self.poll_interval = float(poll_interval)
        self.checkpoint = str(checkpoint) if checkpoint is not None else None
        #: how long the node goes on computing for the task, from when it takes the request: it
        #: records each round's progress, the one that ends the task too, and goes on until the
        #: stream's next run asks (0: one round, once a batch is committed)
        self.keep_for_s = float(keep_for_s)

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (f"{CLASSPATH_MODULE}.{type(self).__qualname__}",
                {"state_dir": self.state_dir, "table": self.table, "poll_interval": self.poll_interval,
                 "checkpoint": self.checkpoint, "keep_for_s": self.keep_for_s})

    async def run(self) -> AsyncIterator[TriggerEvent]:
        from airflow_stream_provider.streams.probes import check_windows, node_hosted

        bind()  # the checks read tables on an object store with the keys of an Airflow connection
        keeps = self.keep_for_s > 0
        while True:
            try:
                found = await asyncio.to_thread(check_windows, self.state_dir, self.table, self.checkpoint)
                hosted = (found is not None or keeps) and await asyncio.to_thread(node_hosted, Path(self.state_dir))
            except Exception as err:  # the task reports it; the triggerer's loop carries on
                yield TriggerEvent({"status": ERROR, "message": f"{type(err).__name__}: {err}"})
                return
            if found is None and not (keeps and hosted):
                await asyncio.sleep(self.poll_interval)
                continue
            if found is not None and (found["status"] != "committed" or not hosted):
                yield TriggerEvent(found)  # no node computes it: a worker does
                return
            arguments: dict[str, Any] = {"upto_batch": found["to_batch"] if found else None}
            if keeps:  # the node waits for the stream's batches itself, as its detector commits them
                arguments.update(keep_for_s=self.keep_for_s, checkpoint=self.checkpoint,
                                 longest_poll_s=MAX_ANSWER_POLL_S)
                self.log.info("the stream node computes the batches its detector commits for about %.0f s, "
                              "to the stream's own second%s",
                              self.keep_for_s, f", from batch {found['from_batch']}" if found else "")
            elif found is not None:
                self.log.info("detector batches %s to %s committed; the stream node computes them",
                              found["from_batch"], found["to_batch"])
            answer = await ask_node(self.state_dir, "compute", **arguments)
            if answer is None:  # the node let go of the stream before it took the request
                if found is None:
                    continue
                yield TriggerEvent(found)
                return
            if answer.get("status") == node_requests.IDLE:  # no batch came meanwhile: the task waits on
                continue
            for line in answer.get("rounds", ()):
                self.log.info("computed and recorded: %s", line)
            async for event in _ended(self, answer, "compute"):
                yield event
            return


class StreamInstantTrigger(BaseTrigger):
    """Has the stream node compute a PERIOD stream's instant ``at`` (the run's, as the triggerer
    renders it); fires a plain event for a worker when no node hosts the stream, or when ``at`` was
    not rendered (an Airflow whose triggerer renders no template).

    :param state_dir: the stream's state folder (``state/<db>/<name>/`` in its home).
    :param at: the run's instant, ISO 8601 text with a time zone (the rendered
        ``{{ data_interval_end }}``); default None, which resumes the task on a worker.
    """

    def __init__(self, state_dir: str, at: str | None = None) -> None:
        super().__init__()
        self.state_dir = str(state_dir)
        self.at = at

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return f"{CLASSPATH_MODULE}.{type(self).__qualname__}", {"state_dir": self.state_dir, "at": self.at}

    async def run(self) -> AsyncIterator[TriggerEvent]:
        from airflow_stream_provider.streams.probes import node_hosted

        at = instant(self.at)
        if at is None:
            self.log.warning("the run's instant is not known here (%r); a worker computes it", self.at)
            yield TriggerEvent({"status": RESUME})
            return
        if not await asyncio.to_thread(node_hosted, Path(self.state_dir)):
            yield TriggerEvent({"status": RESUME})
            return
        self.log.info("the stream node computes the instant %s", at)
        ti = self.task_instance  # (its run and try are recorded with the progress: see streams.run.run)
        attempt = [ti.run_id, ti.try_number] if ti is not None and ti.run_id and ti.try_number else None
        answer = await ask_node(self.state_dir, "compute", at=at, attempt=attempt)
        if answer is None:
            yield TriggerEvent({"status": RESUME})
            return
        async for event in _ended(self, answer, "compute"):
            yield event


def instant(value: object) -> str | None:
    """A run's instant as ISO text: a rendered ``data_interval_end`` (text, or a datetime when
    templates render to objects); None when it is not one (a template left as it was)."""
    from datetime import datetime

    if isinstance(value, datetime):
        return value.isoformat() if value.tzinfo is not None else None
    if not isinstance(value, str):
        return None
    try:
        found = datetime.fromisoformat(value.strip())
    except ValueError:
        return None
    return found.isoformat() if found.tzinfo is not None else None


class StreamNotifyTrigger(BaseTrigger):
    """Has the stream node deliver the stream's outbox; fires a plain event for a worker when no node
    hosts the stream.

    :param state_dir: the stream's state folder (``state/<db>/<name>/`` in its home).
    """

    def __init__(self, state_dir: str) -> None:
        super().__init__()
        self.state_dir = str(state_dir)

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return f"{CLASSPATH_MODULE}.{type(self).__qualname__}", {"state_dir": self.state_dir}

    async def run(self) -> AsyncIterator[TriggerEvent]:
        from airflow_stream_provider.streams.probes import node_hosted

        while True:
            if not await asyncio.to_thread(node_hosted, Path(self.state_dir)):
                yield TriggerEvent({"status": RESUME})
                return
            answer = await ask_node(self.state_dir, "notify")
            if answer is None:
                yield TriggerEvent({"status": RESUME})
                return
            if answer["status"] != "waiting":
                async for event in _ended(self, answer, "notify"):
                    yield event
                return
            self.log.warning("%s; asking again in %.0f s", answer.get("message"), NOTIFY_RETRY_S)
            await asyncio.sleep(NOTIFY_RETRY_S)


class StreamCommitTrigger(BaseTrigger):
    """Records the progress the run's compute returned (its XCom), here in the triggerer: a few
    small files, as a worker would write them.

    :param stream: the stream, written ``db.name``.
    :param home: the stream home its definitions, state and tables live in; default None:
        ``$AIRFLOW_STREAM_HOME``, else ``~/airflow-stream``.
    :param compute_task: the task id of the run's compute, whose XCom holds the progress; default
        ``compute``.
    """

    def __init__(self, stream: str, home: str | None = None, compute_task: str = "compute") -> None:
        super().__init__()
        self.stream = stream
        self.home = home
        self.compute_task = compute_task

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (f"{CLASSPATH_MODULE}.{type(self).__qualname__}",
                {"stream": self.stream, "home": self.home, "compute_task": self.compute_task})

    async def run(self) -> AsyncIterator[TriggerEvent]:
        try:
            progress = await asyncio.to_thread(self._progress)
        except Exception as err:  # the XCom could not be read here: a worker commits instead
            self.log.warning("resuming on a worker: the compute's progress could not be read here (%s)", err)
            yield TriggerEvent({"status": RESUME})
            return
        try:
            state = await asyncio.to_thread(record_progress, self.stream, self.home, progress)
        except Exception as err:
            yield TriggerEvent({"status": ERROR, "message": f"{type(err).__name__}: {err}"})
            return
        self.log.info("stream %s: committed %s (consumed batch %s)", self.stream, sorted(progress),
                      state.consumed_batch)
        yield TaskSuccessEvent()

    def _progress(self) -> dict:
        from airflow.sdk.execution_time.xcom import XCom

        ti = self.task_instance  # the triggerer serves single XComs (not the sequences xcom_pull asks for)
        assert ti is not None, "a trigger the triggerer runs has its task instance"
        return progress_of(XCom.get_one(key="return_value", dag_id=ti.dag_id, task_id=self.compute_task,
                                        run_id=ti.run_id, map_index=-1))


def record_progress(stream: str, home: str | None, progress: dict) -> StreamState:
    """Record a run's ``progress`` for ``stream`` (``db.name``) in ``home``, as the commit task does;
    the stream's state after it."""
    from airflow_stream_provider.streams.run import commit_progress
    from airflow_stream_provider.streams.store import StreamStore

    db, _, name = stream.partition(".")
    return commit_progress(db, name, progress, store=StreamStore(Path(home) if home else None))


def progress_of(value: object) -> dict:
    """A compute task's progress as its XCom holds it: a dict from a worker, its JSON text when a
    trigger ended the task (Airflow stores a trigger's XComs as text), nothing when it computed
    nothing."""
    if isinstance(value, str):
        value = json.loads(value)
    return dict(value) if isinstance(value, dict) else {}


async def _ended(trigger: BaseTrigger, answer: dict, role: str) -> AsyncIterator[TriggerEvent]:
    """The event that ends the task as the node's ``answer`` says."""
    status = answer.get("status")
    if role == "compute" and node_requests.nodata(answer):
        trigger.log.info("IGNORE_NODATA_TRIGGER: no new rows for %s trigger(s)", answer["skipped"])
        yield TaskSkippedEvent()
    elif status == "done":
        trigger.log.info("the stream node's %s: %s", role, answer.get("summary", "done"))
        if answer.get("per_trigger"):
            trigger.log.info("computed trigger by trigger: %s", answer["per_trigger"])
        value = answer.get("progress") if role == "compute" else {"sent": answer.get("sent", 0),
                                                                  "dropped": answer.get("dropped", 0)}
        yield TaskSuccessEvent(xcoms={"return_value": value})
    elif status == "skipped":
        trigger.log.info("the stream node's %s: %s", role, answer.get("message"))
        yield TaskSkippedEvent()
    else:
        yield TriggerEvent({"status": ERROR, "message": answer.get("message", f"the {role} request failed")})
