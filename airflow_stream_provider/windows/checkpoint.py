"""A live detector's checkpoint: where it is in the trigger table's history and its groups' state,
batch by batch, in a folder (or an object store prefix) of small files.

- ``metadata``: the checkpoint's identity (``id``, which a stream records to tell its checkpoint
  from a replacement) and where its change feed starts (``after``: the last version never read).
- ``offsets/<N>``: written before batch N runs, the versions it reads and the processing time it
  runs at. A batch started and never committed runs again with the same offset after a crash.
- ``state/<N>.delta``: the groups batch N changed (their state text and processing-time timeout;
  null: removed); ``state/<N>.snapshot``: every group, every :data:`SNAPSHOT_EVERY` batches.
- ``commits/<N>``: batch N is done, its events written and its state saved. The sensors watch these
  (:func:`airflow_stream_provider.streams.probes.last_commit`), in the format Structured Streaming
  gives them (``v1``, then JSON).
- ``events_batch``: the last batch that found events, written before its commit: a stream's DAG
  wakes for batches with something to compute, not for every commit.

A batch's state is read back from the latest snapshot and the deltas after it up to the last
commit, so a delta written by a batch that never committed is never read.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from airflow_stream_provider import storage
from airflow_stream_provider.exceptions import StreamError
from airflow_stream_provider.storage import Location, is_remote
from airflow_stream_provider.windows.core import json_safe

#: the ``engine`` a checkpoint of this format names in its ``metadata``
ENGINE = "airflow-stream-detector"
#: a snapshot of every group's state every this many batches (the deltas between are replayed)
SNAPSHOT_EVERY = 100
#: offsets, commits and state files kept behind the latest snapshot, for inspection
RETAIN = 100
#: the file naming the last batch that found events
EVENTS_MARK = "events_batch"


class CheckpointFormatError(StreamError):
    """The checkpoint folder holds something this detector cannot continue from."""


@dataclass
class Recovered:
    """What a checkpoint says when a detector starts from it."""

    id: str
    after: int | None  # the version the change feed starts after (None: from the first version)
    committed: int = -1  # the last committed batch
    position: int | None = None  # the last version read by it (None: no batch committed yet)
    planned: dict | None = None  # the offset of a batch that started and did not commit
    groups: dict[str, list] = field(default_factory=dict)  # key text -> [state text, timeout ms | None]
    snapshot: int = -1  # the batch of the latest snapshot


def _numbered(location: Location, suffix: str = "") -> list[int]:
    try:
        found = storage.names(location)
    except FileNotFoundError:
        return []
    out = []
    for name in found:
        stem = name[: len(name) - len(suffix)] if suffix and name.endswith(suffix) else (None if suffix else name)
        if stem is not None and stem.isdigit():
            out.append(int(stem))
    return sorted(out)


class Checkpoint:
    def __init__(self, location: Location) -> None:
        self.location = location

    def _at(self, *names: str) -> Location:
        return storage.join(self.location, *names)

    def recover(self, after: int | None) -> Recovered:
        """Read the checkpoint, making it (starting after version ``after``) when there is none."""
        try:
            meta = json.loads(storage.read_text(self._at("metadata")).splitlines()[0])
        except FileNotFoundError:
            meta = {"id": str(uuid.uuid4()), "engine": ENGINE, "after": after}
            storage.write_text(self._at("metadata"), json.dumps(meta) + "\n")
            return Recovered(id=meta["id"], after=after)
        except (IndexError, ValueError) as err:
            raise CheckpointFormatError(f"the detector checkpoint {self.location} has an unreadable metadata "
                                        f"file ({err})") from None
        if meta.get("engine") != ENGINE:
            raise CheckpointFormatError(
                f"the detector checkpoint {self.location} was written by Spark Structured Streaming (an "
                "earlier version of this provider), whose state this detector cannot read: stop the stream, "
                "DROP STREAM and CREATE it again (FILL_HISTORY_FIRST recomputes its history)")
        found = Recovered(id=str(meta["id"]), after=meta.get("after"))
        commits = _numbered(self._at("commits"))
        if commits:
            found.committed = commits[-1]
            found.position = json.loads(storage.read_text(self._at("offsets", str(found.committed))))["last"]
        offsets = _numbered(self._at("offsets"))
        if offsets and offsets[-1] > found.committed:
            found.planned = json.loads(storage.read_text(self._at("offsets", str(offsets[-1]))))
        self._load_state(found)
        return found

    def _load_state(self, found: Recovered) -> None:
        snapshots = [n for n in _numbered(self._at("state"), ".snapshot") if n <= found.committed]
        start = -1
        if snapshots:
            start = snapshots[-1]
            found.groups = json.loads(storage.read_text(self._at("state", f"{start}.snapshot")))["groups"]
            found.snapshot = start
        for n in _numbered(self._at("state"), ".delta"):
            if start < n <= found.committed:
                for key, value in json.loads(storage.read_text(self._at("state", f"{n}.delta")))["groups"].items():
                    if value is None:
                        found.groups.pop(key, None)
                    else:
                        found.groups[key] = value

    def plan(self, batch: int, offset: dict) -> None:
        """Record the offset of ``batch`` before it runs."""
        storage.write_text(self._at("offsets", str(batch)), json.dumps(offset))

    def save(self, batch: int, changed: dict[str, list | None], groups: dict[str, list] | None = None) -> None:
        """The state after ``batch``: the groups it changed, and with ``groups`` a snapshot of all."""
        storage.write_text(self._at("state", f"{batch}.delta"), json.dumps({"groups": changed}))
        if groups is not None:
            storage.write_text(self._at("state", f"{batch}.snapshot"), json.dumps({"groups": groups}))

    def mark_events(self, batch: int) -> None:
        """Batch ``batch`` found events (before its commit)."""
        storage.write_text(self._at(EVENTS_MARK), f"{batch}\n")

    def commit(self, batch: int, events: int) -> None:
        storage.write_text(self._at("commits", str(batch)),
                           "v1\n" + json.dumps({"nextBatchWatermarkMs": 0, "events": events}) + "\n")

    def prune(self, before: int) -> None:
        """Delete the files of batches before ``before`` (a snapshot at or after it holds their state)."""
        for folder, suffixes in (("offsets", ("",)), ("commits", ("",)), ("state", (".delta", ".snapshot"))):
            for suffix in suffixes:
                for n in _numbered(self._at(folder), suffix):
                    if n < before:
                        storage.delete(self._at(folder, f"{n}{suffix}"))


def key_text(key: tuple) -> str:
    """The text a group's state is kept under in a detector checkpoint."""
    return json.dumps([json_safe(v) for v in key], default=str)


def app_id_of(stream: str, checkpoint: str) -> str:
    """The Delta transaction id the event commits of ``stream``'s detector on ``checkpoint`` record."""
    place = checkpoint if is_remote(checkpoint) else Path(checkpoint).resolve()
    return "airflow-stream-detector-" + hashlib.sha1(f"{stream}\x1f{place}".encode()).hexdigest()[:16]
