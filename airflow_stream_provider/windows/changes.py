"""A trigger table's Delta change feed, read by the Delta Lake Rust kernel: one reader per table for
every stream of the process that follows it.

A version's changes are read once (``load_cdf`` of that version: its change-data files, or the files
it added and removed) and kept while the streams behind it still need them, so twenty streams on one
table cost one read per commit, not twenty. New versions are found by the name of the table's next
log entry (a ``stat`` every few tens of milliseconds on a local table; the kernel's log listing on an
object store), and the streams waiting on the feed are woken when one lands.

Table features (:mod:`~airflow_stream_provider.warehouse.features`): the kernel's change feed applies
deletion vectors (a row deleted through one is a ``delete``) and gives no change for a commit whose
actions are all ``dataChange=false`` (OPTIMIZE, compaction, REORG ... PURGE), so those fire nothing
again. It refuses column mapping: the change feed of a column-mapped table is read from the files each
version names (:mod:`~airflow_stream_provider.warehouse.change_files`), by Spark a version at a time
where those cannot say it. A version whose files VACUUM removed cannot be read by any: the read fails
with an error that says so (:func:`vacuumed`), never with fewer rows.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
import time
from collections import OrderedDict
from typing import TYPE_CHECKING

import pyarrow as pa

if TYPE_CHECKING:
    from deltalake import DeltaTable

from urllib.parse import unquote

from airflow_stream_provider import storage
from airflow_stream_provider.storage import Location, is_remote
from airflow_stream_provider.warehouse import mapping
from airflow_stream_provider.warehouse.catalog import WarehouseError
from airflow_stream_provider.warehouse.change_files import version_changes
from airflow_stream_provider.warehouse.features import features_of
from airflow_stream_provider.warehouse.snapshots import plain_strings, rows

#: how often a followed table's log is looked at for a new version (local tables; an object store's
#: listing is slower and costs requests, so it is looked at every :data:`REMOTE_POLL_S`)
LOCAL_POLL_S = 0.02
REMOTE_POLL_S = 0.5
#: versions kept after they were read, for the streams behind the first reader
CACHED_VERSIONS = 512
CACHED_BYTES = 256 << 20
#: the change feed's own columns, after the table's
CHANGE_COLUMNS = ("_change_type", "_commit_version", "_commit_timestamp")


class ChangeFeed:
    """The change feed of the Delta table at ``path`` (a folder or an ``s3://`` URL)."""

    def __init__(self, path: Location) -> None:
        self.path = path
        self.remote = is_remote(path)
        self.poll_s = REMOTE_POLL_S if self.remote else LOCAL_POLL_S
        self._table: DeltaTable | None = None  # the kernel's table, opened at the first read
        self._latest: int | None = None
        self._cache: OrderedDict[int, pa.Table] = OrderedDict()
        self._cached_bytes = 0
        self._read_lock = threading.Lock()
        self._landed = threading.Condition()
        self._poller: threading.Thread | None = None
        self._followers = 0
        self._stopping = False

    # --- versions --------------------------------------------------------------------------------

    def latest(self) -> int | None:
        """The table's latest version, looked up now (None: no table, or no commit yet)."""
        if self.remote:
            with self._read_lock:  # the kernel's table is shared with the reads
                table = self._open()
                if table is None:
                    return None
                table.update_incremental()
                found: int | None = table.version()
        else:
            found = self._latest_local()
        with self._landed:
            if found is not None and (self._latest is None or found > self._latest):
                self._latest = found
                self._landed.notify_all()
            return self._latest

    def _latest_local(self) -> int | None:
        log = os.path.join(str(self.path), "_delta_log")
        version = self._latest
        if version is None:
            try:
                entries = [int(n[:20]) for n in os.listdir(log) if n.endswith(".json") and n[:20].isdigit()]
            except FileNotFoundError:
                return None
            if not entries:
                return None
            version = max(entries)
        while os.path.exists(f"{log}/{version + 1:020d}.json"):  # (a stat every poll: kept to the minimum)
            version += 1
        return version

    def wait(self, after: int | None, timeout: float) -> int | None:
        """Wait until a version after ``after`` is known, or ``timeout`` seconds; the latest version.
        With a poller running (:meth:`follow`) this sleeps until it finds one; else it looks itself."""
        if self._poller is None:
            deadline = time.monotonic() + timeout
            while True:
                found = self.latest()
                if (found is not None and (after is None or found > after)) or time.monotonic() >= deadline:
                    return found
                time.sleep(min(self.poll_s, max(0.0, deadline - time.monotonic())))
        with self._landed:
            if self._latest is None or (after is not None and self._latest <= after):
                self._landed.wait(timeout)
            return self._latest

    def wake(self) -> None:
        """Wake whoever waits on the feed (a stream being stopped)."""
        with self._landed:
            self._landed.notify_all()

    # --- followers: one poller per table ---------------------------------------------------------

    def follow(self) -> None:
        """A stream follows the feed: a poller looks for new versions while any does."""
        with self._landed:
            self._followers += 1
            if self._poller is None:
                self._stopping = False
                self._poller = threading.Thread(target=self._poll, name=f"change-feed:{self.path}", daemon=True)
                self._poller.start()

    def unfollow(self) -> None:
        with self._landed:
            self._followers -= 1
            if self._followers > 0 or self._poller is None:
                return
            self._stopping = True
            poller, self._poller = self._poller, None
            self._landed.notify_all()
        poller.join(timeout=5)

    @property
    def followers(self) -> int:
        return self._followers

    def _poll(self) -> None:
        while not self._stopping:
            with contextlib.suppress(Exception):  # a table being replaced, an object store hiccup: next time
                self.latest()
            time.sleep(self.poll_s)

    # --- reading ---------------------------------------------------------------------------------

    def _open(self):
        if self._table is None:
            from deltalake import DeltaTable
            from deltalake.exceptions import TableNotFoundError

            if self.remote:
                storage.export_credentials()
            try:
                self._table = DeltaTable(str(self.path))
            except TableNotFoundError:
                return None
        return self._table

    def changes(self, first: int, last: int) -> pa.Table | None:
        """The changes of versions ``first`` to ``last`` (inclusive) in commit order: the table's
        columns (an attached table's under the model's names), then ``_change_type``,
        ``_commit_version`` and ``_commit_timestamp``. None when no version in the range changed a row."""
        parts = [self._version(v) for v in range(first, last + 1)]
        parts = [p for p in parts if p.num_rows]
        if not parts:
            return None
        return parts[0] if len(parts) == 1 else pa.concat_tables(parts, promote_options="permissive")

    def _version(self, version: int) -> pa.Table:
        with self._read_lock:
            found = self._cache.get(version)
            if found is not None:
                self._cache.move_to_end(version)
                return found
            table = self._open()
            assert table is not None, f"{self.path}: version {version} of a table that is not there"
            if table.version() < version:
                table.update_incremental()
            try:
                features = features_of(table)
                if features.kernel_change_feed:
                    read = table.load_cdf(starting_version=version, ending_version=version)
                    changes = plain_strings(pa.RecordBatchReader.from_stream(read).read_all())
                else:  # column mapping: the kernel's change feed refuses it; read the version's files
                    found = version_changes(self.path, version, pa.schema(table.schema().to_arrow()), features)
                    changes = plain_strings(found) if found is not None else spark_changes(self.path, version)
            except Exception as err:
                gone = self.missing(version)
                if gone:
                    raise vacuumed(self.path, version, gone) from err
                raise
            changes = mapping.arrow(self.path, changes)  # an attached table's columns under the model's names
            self._cache[version] = changes
            self._cached_bytes += changes.nbytes
            while len(self._cache) > CACHED_VERSIONS or (self._cached_bytes > CACHED_BYTES and len(self._cache) > 1):
                _, dropped = self._cache.popitem(last=False)
                self._cached_bytes -= dropped.nbytes
            return changes

    def snapshot(self, version: int, columns: list[str]) -> pa.Table:
        """The table's rows at ``version`` (FILL_HISTORY: the history a stream starts from), read by
        the kernel: deletion vectors applied, columns by their logical names."""
        if self.remote:
            storage.export_credentials()
        return mapping.arrow(self.path, rows(str(self.path), version, mapping.sources(self.path, columns)))

    def missing(self, version: int) -> list[str]:
        """The data and change files version ``version`` adds that are not there (VACUUM removed them)."""
        try:
            text = storage.read_text(storage.join(self.path, "_delta_log", f"{version:020d}.json"))
        except FileNotFoundError:
            return []
        named = [action[kind]["path"] for action in map(json.loads, filter(None, text.splitlines()))
                 for kind in ("add", "cdc") if kind in action]
        return [name for name in named
                if "://" not in name and not storage.exists(storage.join(self.path, unquote(name)))]

    def files(self, version: int) -> int:
        """How many data files version ``version`` adds or changes (an admission limit counts these);
        a compaction's files (``dataChange=false``) hold no change and are not counted."""
        text = storage.read_text(storage.join(self.path, "_delta_log", f"{version:020d}.json"))
        actions = [json.loads(line) for line in text.splitlines() if line]
        return sum(1 for action in actions if "cdc" in action
                   or ("add" in action and action["add"].get("dataChange", True)))


def spark_changes(path: Location, version: int) -> pa.Table:
    """Version ``version``'s changes read by Spark (the process's session), in the kernel's shape:
    the table's columns, then ``_change_type``, ``_commit_version`` and ``_commit_timestamp``."""
    from pyspark.sql import SparkSession

    from airflow_stream_provider.spark.session import local_session

    spark = SparkSession.getActiveSession() or local_session()
    frame = (spark.read.format("delta").option("readChangeFeed", "true").option("startingVersion", version)
             .option("endingVersion", version).load(str(path)))
    return plain_strings(frame.toArrow())


def vacuumed(path: Location, version: int, gone: list[str]) -> WarehouseError:
    """The error of a read of a version whose files VACUUM removed: the stream is behind the table's
    retention, and what it missed cannot be read as changes any more."""
    return WarehouseError(
        f"version {version} of the Delta table {path} cannot be read: {len(gone)} of its files are gone "
        f"({gone[0]}...), removed by VACUUM after the stream last read the table",
        hint="its changes cannot be read any more: make the stream again from the table's snapshot (DROP "
             "STREAM, then CREATE STREAM ... FILL_HISTORY), or RECALCULATE STREAM the span they covered; keep "
             "delta.deletedFileRetentionDuration longer than a stream may stay behind")


class FeedRegistry:
    """The feeds of the tables the streams of one process follow, one per table."""

    def __init__(self) -> None:
        self._feeds: dict[str, ChangeFeed] = {}
        self._lock = threading.Lock()

    def get(self, path: Location) -> ChangeFeed:
        key = str(path)
        with self._lock:
            feed = self._feeds.get(key)
            if feed is None:
                feed = self._feeds[key] = ChangeFeed(path)
            return feed

    def forget_unfollowed(self) -> None:
        """Drop the feeds no stream follows any more (and their cached versions)."""
        with self._lock:
            for key in [k for k, f in self._feeds.items() if f.followers <= 0]:
                del self._feeds[key]
