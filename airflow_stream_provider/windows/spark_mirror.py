"""A stream's own detector checkpoint, kept by the ``spark`` engine's table query.

Each batch of the table query that reads rows of a stream commits, in ``foreachBatch``, one batch
of the stream's own checkpoint, in the in-process detector's format
(:mod:`airflow_stream_provider.windows.checkpoint`): the versions it read (``offsets/<N>``, with
the query's batch id), its events (one Delta commit recording (app id, N), the app id the
in-process detector on that checkpoint uses), the state of the groups it ran (``state/<N>.delta``,
the step's text, as the in-process detector keeps it), then ``commits/<N>``. So:

- the stream's batch ids go on from the in-process detector's, and its DAG's sensor watches the
  same ``commits/`` whichever engine runs it (:func:`airflow_stream_provider.streams.probes.last_commit`);
- a stream moves to the in-process engine by starting its detector on that checkpoint, and to the
  spark engine by catching its checkpoint up with the in-process detector to the table's version
  and joining the query from the next version, its groups' state as the checkpoint holds it;
- a query batch replayed after a crash is mirrored once: a mirrored batch records the query's
  checkpoint and batch id, and one planned and not committed is finished with the same offset.

A query batch that reads no row of the stream writes nothing to its checkpoint (the in-process
detector also passes over versions without its rows): those versions, read again by the in-process
detector, change nothing.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING

import pandas as pd

from airflow_stream_provider.windows.checkpoint import RETAIN, SNAPSHOT_EVERY, Checkpoint
from airflow_stream_provider.windows.detector import BatchReport, DetectedBatch
from airflow_stream_provider.windows.events import commit_events, event_table

if TYPE_CHECKING:
    from airflow_stream_provider.windows.spark_detector import Member


class Mirror:
    """One member's checkpoint as the table query writes it (on the driver, in ``foreachBatch``)."""

    def __init__(self, member: Member, query: str) -> None:
        assert member.mirror is not None
        self.member = member
        self.query = query  # the query's checkpoint: its batch ids count from 0 in each
        self.checkpoint = Checkpoint(member.mirror)
        found = self.checkpoint.recover(member.first_version - 1)
        self.batch = found.committed
        self.planned = found.planned
        self.groups = found.groups
        self.snapshot = found.snapshot
        self.position = found.position if found.position is not None else found.after
        self.query_batch: int | None = None  # the last query batch mirrored
        if found.committed >= 0:
            import json

            from airflow_stream_provider import storage

            offset = json.loads(storage.read_text(storage.join(member.mirror, "offsets", str(found.committed))))
            if offset.get("query") == query:
                self.query_batch = offset.get("query_batch")

    def write(self, query_batch: int, events: pd.DataFrame, states: dict[str, str], last_version: int | None,
              rows: int, at_ms: int, after_batch: Callable[[DetectedBatch], None] | None = None) -> BatchReport | None:
        """Mirror query batch ``query_batch``: the stream's ``events`` and the state of the groups it
        ran (``states``), which read ``rows`` rows up to ``last_version``; ``after_batch`` is told of
        the batch before it commits, as the in-process detector tells it. What was committed (None:
        nothing, the batch read no row of the stream or was mirrored before)."""
        began = time.monotonic()
        if last_version is None or (self.query_batch is not None and query_batch <= self.query_batch):
            return None
        batch = self.batch + 1
        offset = self.planned
        if offset is None or (offset.get("query"), offset.get("query_batch")) != (self.query, query_batch):
            first = None if self.position is None else self.position + 1
            offset = {"first": first, "last": max(last_version, -1 if self.position is None else self.position),
                      "at_ms": at_ms, "query": self.query, "query_batch": query_batch}
            self.checkpoint.plan(batch, offset)
        written = event_table([events], batch, int(offset["at_ms"])) if len(events) else None
        count = 0 if written is None else written.num_rows
        if written is not None:
            commit_events(written, self.member.events_path, self.member.app_id, batch)
        ran: dict[str, list] = {key: [state, None] for key, state in states.items()}
        merged = {**self.groups, **ran}
        snapshot = batch - self.snapshot >= SNAPSHOT_EVERY
        self.checkpoint.save(batch, dict(ran), merged if snapshot else None)
        if count:
            self.checkpoint.mark_events(batch)
        if after_batch is not None:
            after_batch(DetectedBatch(batch, written, int(offset["last"]), rows=rows))
        self.checkpoint.commit(batch, count)
        self.batch, self.groups, self.planned, self.query_batch = batch, merged, None, query_batch
        self.position = int(offset["last"])
        if snapshot:
            self.snapshot = batch
            self.checkpoint.prune(batch - RETAIN)
        return BatchReport(batch, offset["first"], offset["last"], rows, len(states), count,
                           time.monotonic() - began, time.time())
