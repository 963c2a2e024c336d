"""Group commit: concurrent writes of rows into one Delta table share one commit.

A Delta commit costs about ten milliseconds whatever it holds, so a server taking many small
requests at once would spend most of its time committing them one by one. Instead each local table
has a short queue: a write joins it, and the first write that finds no commit under way becomes the
committer. It takes every write waiting with the same schema and keys, commits their rows as one
MERGE (:func:`.writer.upsert`) and tells each joined write the outcome. Writes that arrive while a
commit is under way wait for it and then join the next one, so a lone writer commits at once and
pays nothing for the queue.

The guarantees a write keeps:

- its rows land in one commit, possibly shared with concurrent writes, all of them or none:
  a failed commit fails every write that joined it, with an error saying so, and writes nothing;
- rows are checked before they join (a write with a bad row never reaches the queue, so it fails
  alone);
- a key written twice keeps the later row, as one MERGE does (a retried write overwrites);
  between writes of one commit, the one that joined later wins;
- the commit holds every row once, so whatever reads the table's change feed (streams, continuous
  queries, triggers) sees each row once.

A table on an object store, or a write of a statement spanning several tables (whose earlier
commits are undone when a later one fails, which a shared commit cannot be), commits alone.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass, field

import pyarrow as pa

from airflow_stream_provider.storage import Location, is_remote
from airflow_stream_provider.warehouse import writer


class SharedCommitFailed(Exception):
    """The commit a write joined failed; none of its writes' rows were written."""


@dataclass(eq=False)
class _Write:
    rows: pa.Table
    keys: tuple[str, ...]
    done: bool = False
    commit: writer.Commit | None = None
    error: BaseException | None = None
    #: how many writes shared the commit
    shared: int = 1


@dataclass(eq=False)
class _Queue:
    ready: threading.Condition = field(default_factory=threading.Condition)
    waiting: list[_Write] = field(default_factory=list)
    committing: bool = False


_queues: dict[str, _Queue] = {}
_queues_lock = threading.Lock()


def upsert(path: Location, rows: pa.Table, keys: Sequence[str]) -> writer.Commit:
    """MERGE ``rows`` into the table at ``path`` (:func:`.writer.upsert`), in one commit shared with
    the concurrent writes to the same table; raises :class:`SharedCommitFailed` when a shared commit
    fails (the error of the commit itself when it held this write alone)."""
    if is_remote(path):
        return writer.upsert(path, rows, keys)
    with _queues_lock:
        queue = _queues.setdefault(str(path), _Queue())
    mine = _Write(rows, tuple(keys))
    with queue.ready:
        queue.waiting.append(mine)
        while queue.committing and not mine.done:
            queue.ready.wait()
        if mine.done:
            return _outcome(mine)
        queue.committing = True
        joined = [w for w in queue.waiting if w.keys == mine.keys and w.rows.schema == mine.rows.schema]
        queue.waiting = [w for w in queue.waiting if all(w is not j for j in joined)]
    try:
        _commit(path, joined)
    finally:
        with queue.ready:
            for write in joined:
                if not write.done:  # the committer was interrupted: its writes are not left waiting
                    write.error, write.done = RuntimeError("the commit was interrupted"), True
            queue.committing = False
            queue.ready.notify_all()
    return _outcome(mine)


def _commit(path: Location, joined: list[_Write]) -> None:
    rows = joined[0].rows if len(joined) == 1 else pa.concat_tables([w.rows for w in joined])
    try:
        commit = writer.upsert(path, rows, joined[0].keys, [w.rows for w in joined] if len(joined) > 1 else ())
    except Exception as err:  # every joined write fails with it
        for write in joined:
            write.error, write.shared, write.done = err, len(joined), True
        return
    for write in joined:
        write.commit, write.shared, write.done = commit, len(joined), True


def _outcome(write: _Write) -> writer.Commit:
    if write.error is None:
        assert write.commit is not None
        return write.commit
    if write.shared == 1:
        raise write.error
    raise SharedCommitFailed(
        f"the commit shared with {write.shared - 1} concurrent write{'s' * (write.shared > 2)} failed "
        f"({type(write.error).__name__}: {write.error}); none of their rows were written") from write.error


def waiting(path: Location) -> int:
    """How many writes to the table at ``path`` wait for the commit under way to end."""
    with _queues_lock:
        queue = _queues.get(str(path))
    if queue is None:
        return 0
    with queue.ready:
        return len(queue.waiting)
