"""AFTER INSERT triggers over attached devices (``CREATE DEVICES ... FROM DELTA``): the stream node
fires them on the commits of the table's owner, who never writes through the project.

While an AFTER INSERT trigger's pattern reaches an attached database, the node follows its table:
every :data:`POLL_S` it looks for versions after the last one the trigger handled, reads each
version's changes through the same readers as the streams (the kernel's change feed, or the files the
version names: :class:`~airflow_stream_provider.windows.changes.ChangeFeed`), under the attach's
mapping, and hands the trigger the tablets of that commit as the listener hands those of a write of
the project's own: one write per device, its rows in time order, each measurement the pattern
matches with its values (``None`` where a row has no point). A row whose device value is NULL or no
path node (``bad.node``) belongs to no device: it fires nothing (the node logs the value). Inserted
rows and the new values of updated rows (MERGE, UPDATE) fire; deleted rows, the old values of
updates, and commits that change no row (OPTIMIZE, compaction) fire nothing.

A trigger fires from the table's version at its CREATE on (:attr:`Entry.since`; a database attached
after the trigger was made: from the version the node first sees). The version a trigger has handled
is kept in ``<trigger folder>/attached/<id>.json`` and written only after its fires of that version
returned: a node stopped or killed in between fires that version again when it comes back (at least
once), and a version is never skipped; the rows committed while no node ran fire when it starts. A
version that cannot be read (its files vacuumed, a table that no longer fits its mapping) is tried
again every round and logged; nothing after it fires until it is read.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence

import pyarrow as pa
import pyarrow.compute as pc

from airflow_stream_provider import config
from airflow_stream_provider import model as m
from airflow_stream_provider.exceptions import CorruptStateError, read_json_object
from airflow_stream_provider.files import make_dirs, write_json
from airflow_stream_provider.node.stateful_triggers import StatefulHost
from airflow_stream_provider.streams import insert_triggers
from airflow_stream_provider.streams.insert_triggers import Entry
from airflow_stream_provider.streams.insert_triggers.registry import progress_path
from airflow_stream_provider.warehouse import listeners
from airflow_stream_provider.warehouse.catalog import Catalog, WarehouseError
from airflow_stream_provider.warehouse.series import attached
from airflow_stream_provider.warehouse.series.store import SeriesDatabase, SeriesStore
from airflow_stream_provider.windows.changes import ChangeFeed, FeedRegistry

log = logging.getLogger(__name__)

#: seconds between looks at the followed tables
POLL_S = 0.5
#: the change types that are points written: an insert, and the new values of an update
WRITTEN = ("insert", "update_postimage")


class AttachedTriggers:
    """The node's follower of the attached tables its AFTER INSERT triggers reach."""

    def __init__(self, stateful: StatefulHost) -> None:
        self.stateful = stateful
        self.root = insert_triggers.folder().absolute()
        self.home = insert_triggers.LISTENER.home(self.root)
        self.store = SeriesStore(Catalog(config.warehouse()))
        self.feeds = FeedRegistry()
        self.stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self._checked: dict[str, tuple] = {}  # db path -> (its entry, the mapping checked) of the table
        self._failing: dict[str, str] = {}  # db path ("": the round) -> the error logged last

    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name="attached-triggers", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self.stopping.set()
        if self._thread is not None:
            self._thread.join(timeout=60)

    def _loop(self) -> None:
        while not self.stopping.is_set():
            try:
                self.round()
            except Exception as err:  # a registry being rewritten, a database being dropped: the next round
                self._warn("", f"attached triggers: {err}")
            self.stopping.wait(POLL_S)

    def _warn(self, key: str, message: str) -> None:
        """Log ``message`` once while it is what ``key`` fails with (a round every :data:`POLL_S`)."""
        if self._failing.get(key) != message:
            log.warning("%s", message)
        self._failing[key] = message

    # --- a round ---------------------------------------------------------------------------------

    def round(self) -> int:
        """Fire the AFTER INSERT triggers on the versions committed since each handled one; how
        many versions were handled."""
        try:
            registered = self.home.entries()
        except CorruptStateError as err:
            self._warn("", f"attached triggers: {err}")
            return 0
        self._failing.pop("", None)
        self._forget_dropped({e.id for e in registered})
        entries = [e for e in registered if e.event is m.TriggerEvent.AFTER_INSERT]
        if not entries:
            return 0
        handled = 0
        for db in self.store.databases():
            covering = [e for e in entries if db.attached and attached.reaches(e.pattern, db)]
            if not covering:
                continue
            try:
                handled += self._follow(db, covering)
                self._failing.pop(str(db.path), None)
            except Exception as err:  # the next round tries the same version again
                self._checked.pop(str(db.path), None)
                self._warn(str(db.path), f"attached triggers on {db.path} (the Delta table at {db.table}): "
                                         f"{type(err).__name__}: {err}; tried again every {POLL_S:g} s")
        return handled

    def _follow(self, db: SeriesDatabase, covering: Sequence[Entry]) -> int:
        feed = self.feeds.get(db.table)
        latest = feed.latest()
        if latest is None:
            return 0
        marks = {e.id: self._mark(e, db, latest) for e in covering}
        handled = 0
        for version in range(min(marks.values()) + 1, latest + 1):
            if self.stopping.is_set():
                break
            due = [e for e in covering if marks[e.id] < version]
            writes = self.writes(db, feed, version)
            if writes:
                for notice in insert_triggers.LISTENER.fire_writes(m.TriggerEvent.AFTER_INSERT, writes, due,
                                                                   self._fire):
                    log.warning("version %s of %s: %s", version, db.table, notice)
            for entry in due:  # after the fires returned: at least once
                marks[entry.id] = version
                self._save(entry, db, version)
            handled += 1
        return handled

    def _fire(self, entry: Entry, tablet: m.Tablet, timeout: float) -> tuple[str | None, m.FailureStrategy, bool]:
        """A STATEFUL trigger on the node's own instance; a STATELESS one on this process's."""
        if not entry.stateful:
            return self.home.fire(entry, tablet, timeout)
        answer = self.stateful.fire(entry.id, tablet)
        strategy = m.FailureStrategy(answer.get("strategy") or entry.strategy.value)
        return answer.get("error"), strategy, bool(answer.get("timed_out"))

    # --- the tablets of a version ----------------------------------------------------------------

    def writes(self, db: SeriesDatabase, feed: ChangeFeed, version: int) -> list[listeners.Write]:
        """The writes of ``version`` of the table of ``db``: one per device (sorted by path), its
        rows in time order."""
        entry, columns = self._mapping(db)
        changes = feed.changes(version, version)
        if changes is None:
            return []
        rows = changes.filter(pc.and_(pc.is_in(changes["_change_type"], pa.array(WRITTEN)),
                                      pc.and_(pc.is_valid(changes["ts"]), pc.is_valid(changes["device"]))))
        if not rows.num_rows:
            return []
        source = next(c.source for c in columns if c.role == "tbname")
        measured = attached.measurements(entry, columns)
        types = {name: kind for name, _, kind in measured}
        out = []
        for value in sorted(set(rows["device"].to_pylist())):
            try:
                device = attached.device_path(db.path, value, source)
            except WarehouseError as err:  # no device a trigger could name, as NULL: its rows fire nothing
                log.warning("version %s of %s: %s; its rows fire no trigger", version, db.table, err)
                continue
            part = rows.filter(pc.equal(rows["device"], value))
            part = part.take(pc.sort_indices(part["ts"]))  # (a stable sort: the commit's order at one time)
            write = listeners.series_write(device, part["ts"].combine_chunks(),
                                           {name: part[column].combine_chunks() for name, column, _ in measured},
                                           types.__getitem__)
            if write.micros:
                out.append(write)
        return out

    def _mapping(self, db: SeriesDatabase) -> tuple[dict, tuple]:
        """The attach's record and its mapping, checked against the table (and registered for the
        feed's reader) when first followed and after a failure."""
        found = self._checked.get(str(db.path))
        if found is None or found[0]["location"] != db.table:
            entry = attached.recorded(db, self.store.catalog)
            found = self._checked[str(db.path)] = (entry, attached.check(db.path, entry))
        return found

    # --- the versions handled --------------------------------------------------------------------

    def _mark(self, entry: Entry, db: SeriesDatabase, latest: int) -> int:
        """The last version of ``db``'s table ``entry`` has handled: kept by the node, else the
        version at its CREATE, else (a database attached after it) ``latest``, kept from now."""
        try:
            kept = read_json_object(progress_path(self.root, entry.id)).get(str(db.path))
        except (FileNotFoundError, CorruptStateError):
            kept = None
        if isinstance(kept, dict) and kept.get("table") == db.table and isinstance(kept.get("version"), int):
            return kept["version"]
        since = next((v for p, t, v in entry.since if p == str(db.path) and t == db.table), None)
        if since is not None:
            return since
        self._save(entry, db, latest)
        return latest

    def _save(self, entry: Entry, db: SeriesDatabase, version: int) -> None:
        path = progress_path(self.root, entry.id)
        try:
            kept = read_json_object(path)
        except (FileNotFoundError, CorruptStateError):
            kept = {}
        kept[str(db.path)] = {"table": db.table, "version": version}
        make_dirs(path.parent)
        write_json(path, kept, durable=True)

    def _forget_dropped(self, live: set[str]) -> None:
        """The progress of triggers dropped since (a DROP removes it; a round under way may have
        written it again)."""
        folder = self.root / "attached"
        if folder.is_dir():
            for path in folder.glob("*.json"):
                if path.stem not in live:
                    path.unlink(missing_ok=True)
