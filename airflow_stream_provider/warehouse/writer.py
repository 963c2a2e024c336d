"""Commits to Delta tables through the Delta Lake Rust kernel (``deltalake``).

Table statements write through the Rust kernel rather than Spark: a MERGE of a few rows commits in
tens of milliseconds instead of a second of Spark jobs, and no JVM is needed to create or fill a
table. The tables are ordinary Delta tables with the change data feed on; Spark reads, streams and
deletes from them, and the two writers serialize through Delta's optimistic concurrency.
"""

from __future__ import annotations

import contextlib
import logging
import os
import random
import threading
import time
import zlib
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc

from airflow_stream_provider.files import try_lock
from airflow_stream_provider.storage import Location, is_remote

if TYPE_CHECKING:
    from deltalake import DeltaTable

log = logging.getLogger(__name__)

#: give up on a commit that keeps conflicting after this long
COMMIT_DEADLINE_S = 300.0
#: compact small files every this many commits (only the writer landing on a due version does it,
#: :func:`compaction_due`).
#: A live stream commits a small file to its tables every second, and each MERGE and append costs
#: more with every file the table holds (the kernel's MERGE of 100 rows: 25 ms at 1 file, 95 ms at
#: 400); compacting every 50 commits keeps them near the first cost, for about 2 ms per commit.
COMPACT_EVERY = 50
#: compaction joins files smaller than this; a larger file is left as it is, so a compaction
#: rewrites at most this much however large the table grows
COMPACT_TARGET_BYTES = 16 * 1024 * 1024
#: the file beside a local table's log whose lock a compaction holds (readers and VACUUM pass over
#: names starting with an underscore)
COMPACTION_LOCK = "_compaction.lock"


@dataclass(frozen=True)
class Commit:
    path: Location
    before: int  # table version the change was based on
    version: int  # version this commit created
    attempts: int


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def dedupe_last(table: pa.Table, keys: Sequence[str]) -> pa.Table:
    """Keep the last row of each key, in row order: a later write of a key replaces an earlier one."""
    if table.num_rows < 2:
        return table
    try:  # most batches repeat no key: Arrow counts the keys quicker than pandas marks repeats
        if table.group_by(list(keys), use_threads=False).aggregate([]).num_rows == table.num_rows:
            return table
    except (pa.ArrowNotImplementedError, pa.ArrowTypeError):
        pass
    # pandas' hashing of the key columns is several times quicker than an Arrow group-by here
    earlier = table.select(list(keys)).to_pandas().duplicated(keep="last").to_numpy()
    if not earlier.any():
        return table
    return table.filter(pa.array(~earlier))


def _is_conflict(err: Exception) -> bool:
    from deltalake.exceptions import CommitFailedError

    text = str(err).lower()
    return isinstance(err, CommitFailedError) or "concurrent" in text or "version already exists" in text


#: local tables kept open between commits (the most recently used)
KEPT_TABLES = 64
_kept: OrderedDict[str, tuple[DeltaTable, tuple]] = OrderedDict()
_kept_lock = threading.Lock()
_path_locks: dict[str, threading.RLock] = {}


def commit_identity(path: str, version: int) -> tuple:
    """What identifies the commit file of ``version`` of the local table at ``path`` (the same path
    is another table once dropped and created again); () when there is none."""
    try:
        found = os.stat(os.path.join(path, "_delta_log", f"{version:020d}.json"))
    except OSError:
        return ()
    return found.st_ino, found.st_mtime_ns, found.st_size


def _commit_file(path: str, table: DeltaTable) -> tuple:
    """What identifies the table's latest commit file; () when it cannot be seen."""
    return commit_identity(path, table.version())


@contextlib.contextmanager
def latest(path: Location) -> Iterator[DeltaTable]:
    """The Delta table at ``path`` as it is now, for this thread alone until the block ends; raises
    :class:`deltalake.exceptions.TableNotFoundError` when there is none.

    A local table is kept open from one use to the next (writes through it move it along), and
    brought up to date by reading the log entries written since: a live stream commits to its
    tables every second, and opening one afresh reads its log from the last checkpoint, tens of
    milliseconds each time. A table is opened afresh when its latest commit file is not the one
    seen last (the table was dropped and made again) and after a block that raised."""
    from deltalake import DeltaTable

    key = str(path)
    if is_remote(path):
        yield DeltaTable(key)
        return
    with _kept_lock:
        lock = _path_locks.setdefault(key, threading.RLock())
    with lock:
        with _kept_lock:
            table, seen = _kept.pop(key, (None, ()))
        if table is None or not seen or _commit_file(key, table) != seen:
            table = DeltaTable(key)
        elif commit_identity(key, table.version() + 1):
            # (versions are consecutive: without the next one the table is current, and the kernel's
            # update would replay the log from its last checkpoint only to find nothing)
            table.update_incremental()
        yield table  # (an error leaves it out of the kept tables)
        seen = _commit_file(key, table)
        with _kept_lock:
            _kept[key] = (table, seen)
            while len(_kept) > KEPT_TABLES:
                _kept.popitem(last=False)


def retrying(path: Location, action: Callable[[DeltaTable], object]) -> Commit:
    """Run ``action(table)`` on the table as it is now until it commits; conflicts are retried with
    backoff, each on the table read again."""
    deadline = time.monotonic() + COMMIT_DEADLINE_S
    attempt = 0
    while True:
        attempt += 1
        try:
            with latest(path) as table:
                before = table.version()
                action(table)
                version = table.version()
        except Exception as err:
            if not _is_conflict(err) or time.monotonic() > deadline:
                raise
            time.sleep(min(0.5, 0.005 * 2 ** min(attempt, 7)) * random.uniform(0.5, 1.5))
            continue
        if version > before:
            compact_if_due(path, version)
        return Commit(path, before, version, attempt)


#: a key range: a time or integer key column and the least and greatest of its values
KeyRange = tuple[str, object, object]
#: Delta keeps a file's time statistics truncated to the millisecond: its latest time can be later
#: than its statistic by less than this
_STATS_TRUNCATION = timedelta(milliseconds=1)


def _key_ranges(rows: pa.Table, keys: Sequence[str]) -> list[KeyRange]:
    """The range of each time or integer key of ``rows``: a row of the table whose key equals one
    of ``rows`` lies within all of them."""
    out = []
    for key in keys:
        kind = rows.schema.field(key).type
        if not (pa.types.is_integer(kind) or pa.types.is_timestamp(kind) and kind.unit in ("s", "ms", "us")):
            continue
        low, high = (value.as_py() for value in pc.min_max(rows[key]).values())
        if low is not None and high is not None:
            out.append((key, low, high))
    return out


def _within_sql(ranges: list[KeyRange], alias: str = "") -> list[str]:
    """The conditions of ``ranges`` in the kernel's SQL (the table's columns prefixed by ``alias``)."""
    def literal(value: object) -> str:
        return f"'{value.isoformat()}'" if isinstance(value, datetime) else str(value)

    return [f"{alias}{_quote(key)} >= {literal(low)} AND {alias}{_quote(key)} <= {literal(high)}"
            for key, low, high in ranges]


def _holds_none_within(table: DeltaTable, rows: pa.Table, groups: Sequence[list[KeyRange]]) -> bool:
    """Whether the table's file statistics show that none of its rows lies within the ranges of any
    of ``groups`` (and ``rows`` have the table's columns): then every key of ``rows`` is new, when
    each row lies within all the ranges of one group. A file without statistics for a key might
    hold any."""
    if not groups or not all(groups) or pa.schema(table.schema().to_arrow()) != rows.schema:
        return False
    files = pa.table(table.get_add_actions(flatten=True))
    columns = set(files.column_names)
    stats: dict[str, tuple[list, list]] = {}
    for ranges in groups:
        for key, _, _ in ranges:
            if f"min.{key}" not in columns or f"max.{key}" not in columns:
                return False
            if key not in stats:
                stats[key] = (files[f"min.{key}"].to_pylist(), files[f"max.{key}"].to_pylist())

    def may_hold(i: int, ranges: list[KeyRange]) -> bool:  # file i: room for a row within every range
        for key, low, high in ranges:
            lows, highs = stats[key]
            slack = _STATS_TRUNCATION if isinstance(high, datetime) else 0
            if lows[i] is not None and highs[i] is not None and (lows[i] > high or highs[i] + slack < low):
                return False
        return True

    try:
        return not any(may_hold(i, ranges) for ranges in groups for i in range(files.num_rows))
    except TypeError:  # a time without a zone against one with a zone
        return False


def append_if_new(table: DeltaTable, rows: pa.Table, keys: Sequence[str],
                  pieces: Sequence[pa.Table] = ()) -> bool:
    """Append ``rows`` to ``table`` and return True when its file statistics show that no row lies
    within the ranges of ``rows``' keys (every key is new: an append is what a MERGE would do);
    False, writing nothing, otherwise. ``pieces`` (whose rows together hold every row of ``rows``:
    the writes of a group commit) are looked at one by one, each within its own ranges, so that
    writes of far apart keys are not taken for one wide range. ``rows`` are first put in the
    table's own schema (a column they lack is NULL). The append commits only as the next version,
    so a concurrent commit makes it fail and its retry look again."""
    from deltalake import CommitProperties, write_deltalake

    groups = [_key_ranges(piece, keys) for piece in pieces] if pieces else [_key_ranges(rows, keys)]
    schema = pa.schema(table.schema().to_arrow())
    if rows.schema != schema:
        if not set(rows.column_names) <= set(schema.names):
            return False
        try:
            rows = pa.Table.from_arrays(
                [rows[f.name].cast(f.type) if f.name in rows.column_names else pa.nulls(rows.num_rows, f.type)
                 for f in schema], schema=schema)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
            return False
    if not _holds_none_within(table, rows, groups):
        return False
    write_deltalake(table, rows, mode="append", commit_properties=CommitProperties(max_commit_retries=0))
    return True


def upsert(path: Location, rows: pa.Table, keys: Sequence[str], pieces: Sequence[pa.Table] = ()) -> Commit:
    """MERGE ``rows`` into the table: an existing key is replaced, a new key inserted, atomically.

    When the table's file statistics show that no row lies within the range of ``rows``' keys (a
    time series' new rows, a stream's new windows), the rows are appended as they are: a third of a
    MERGE's cost, and two thirds of a write replacing the (empty) range. The append commits only as
    the version after the one whose statistics were read, so nothing can have been committed in
    between: a concurrent commit makes it fail, and its retry looks again (and MERGEs when that
    commit added a row within the range). A batch written again finds its rows there, and MERGEs.
    ``pieces``: the writes ``rows`` joins (:func:`append_if_new`)."""
    rows = dedupe_last(rows, keys)
    ranges = _key_ranges(rows, keys)
    predicate = " AND ".join([f"t.{_quote(k)} = s.{_quote(k)}" for k in keys] + _within_sql(ranges, "t."))

    def merge(table: DeltaTable) -> None:
        if append_if_new(table, rows, keys, pieces):
            return
        (
            table.merge(rows, predicate, source_alias="s", target_alias="t")
            .when_matched_update_all()
            .when_not_matched_insert_all()
            .execute()
        )

    return retrying(path, merge)


def delete_matching(path: Location, rows: pa.Table) -> Commit:
    """Delete the table's rows whose values in ``rows``' columns equal one of ``rows`` (a MERGE on
    those columns, so no value is written into a predicate's text)."""
    keys = rows.column_names
    rows = dedupe_last(rows, keys)
    predicate = " AND ".join(f"t.{_quote(k)} = s.{_quote(k)}" for k in keys)
    return retrying(path, lambda table: table.merge(rows, predicate, source_alias="s", target_alias="t")
                     .when_matched_delete().execute())


def delete_rows(path: Location, predicate: str) -> Commit:
    """Delete the rows matching a SQL ``predicate`` (the kernel's SQL, column names double-quoted)."""
    return retrying(path, lambda table: table.delete(predicate))


def string_equals(column: str, value: str) -> str:
    return f"{_quote(column)} = '" + value.replace("'", "''") + "'"


def undo(commit: Commit) -> bool:
    """Restore the table to before ``commit`` if nothing was committed after it; True when undone."""
    from deltalake import DeltaTable

    table = DeltaTable(str(commit.path))
    if table.version() != commit.version:
        return False
    table.restore(commit.before)
    return True


def compaction_skew(path: Location) -> int:
    """Where in each run of :data:`COMPACT_EVERY` versions the table at ``path`` is compacted, from
    its location: the tables that live streams write together, one commit each per batch (their
    outputs, their event tables), reach their versions together, and compacting them all in the
    same second would hold every stream's batch back at once.

    Only the location's last three parts count (``<database>/<table>`` and the folder above, or a
    stream.s ``<database>/<stream>/events``), so that every writer of a table agrees on it whichever
    way it names the warehouse's root (a relative or a linked path, ``s3://`` or ``s3a://``)."""
    key = "/".join(str(path).rstrip("/").split("/")[-3:])
    return zlib.crc32(key.encode()) % COMPACT_EVERY


def compaction_due(path: Location, version: int) -> bool:
    """Whether the commit that made ``version`` of the table compacts it: one version in every
    :data:`COMPACT_EVERY`, offset by :func:`compaction_skew`, from version ``COMPACT_EVERY`` on."""
    return version >= COMPACT_EVERY and (version - compaction_skew(path)) % COMPACT_EVERY == 0


def compact_if_due(path: Location, version: int) -> None:
    """Compact the table's small files when this process's commit made a version on which it is due
    (:func:`compaction_due`). The compaction commits no rows: change-feed readers skip it, and
    earlier versions stay readable.

    Two compactions of the same files must never run at once: the kernel commits both, and the
    table then holds their rows twice. Each version is one commit, so one writer is due for each
    due version; a local table's compactions also take a file lock beside it, which a compaction
    still running from the last due version holds (the next one is then skipped)."""
    if not compaction_due(path, version):
        return
    from deltalake import DeltaTable

    with _compaction_lock(path) as mine:
        if not mine:
            return
        try:  # (a table of its own: the kept one reads the compaction from the log on its next use)
            metrics = DeltaTable(str(path)).optimize.compact(target_size=COMPACT_TARGET_BYTES)
            log.info("compacted %s: %s files into %s", path, metrics.get("numFilesRemoved"),
                     metrics.get("numFilesAdded"))
        except Exception as err:  # a concurrent writer won; the next due version compacts instead
            if not _is_conflict(err):
                raise


@contextlib.contextmanager
def _compaction_lock(path: Location) -> Iterator[bool]:
    """Whether this process holds the table's compaction lock for the block (an object store's table:
    always; its writers are told apart by their versions alone). A table whose folder is gone (dropped
    since the commit) is not compacted."""
    if is_remote(path):
        yield True
        return
    if not os.path.isdir(str(path)):
        yield False
        return
    with try_lock(Path(str(path), COMPACTION_LOCK)) as mine:
        yield mine
