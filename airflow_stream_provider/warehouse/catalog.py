"""Where TDengine databases and tables live on disk, and what each table is.

Layout under the warehouse root (DESIGN §2):

- ``<db>/.database.json``: the database's precision;
- ``<db>/<table>/``: a Delta table, for a supertable or a regular table. Its schema's field metadata
  carries the TDengine type and role of each column, so a table describes itself wherever it is
  copied;
- ``<db>/.subtables/<name>.json``: a subtable's supertable and tag values. It is created with an
  atomic create-if-absent, so two writers creating the same subtable agree on one set of tags;
- ``<db>/.attached/<name>.json``: a Delta table that lives elsewhere (a folder or an ``s3://`` URL)
  attached under ``name`` with a column mapping (:mod:`.mapping`). Its schema is read and the
  mapping checked on every lookup; the table itself is never rewritten by the catalog.

Lookups are kept between requests (a server looks up the same tables on every INSERT): a kept
lookup of a database's table or subtable is used while the modification times of the root, the
database's folder and its ``.subtables`` and ``.attached`` folders are those it was kept with, so a
table or subtable created or dropped by another process is seen on the next lookup. A folder
changed in the last :data:`RECENT_S` seconds is not trusted (a file system's clock may not move
between two quick changes): lookups under it are not kept. This process's own changes forget the
kept lookups at once. An attached table is looked up afresh every time, and so is every table on an
object store (its tables' folders are not on this disk).

Names are case-insensitive, as in TDengine: they are stored in lower case. Every name that becomes
a path obeys the name rule (:mod:`airflow_stream_provider.model.names`), checked on every lookup,
creation and removal, and every path must resolve to a place inside the warehouse root.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa

from airflow_stream_provider.exceptions import StreamError, did_you_mean, read_json_object
from airflow_stream_provider.files import create_text, make_dirs
from airflow_stream_provider.model import ColumnDefinition, DataType, TableName
from airflow_stream_provider.model.names import (
    CQ_NAMESPACE,
    DATABASE,
    RESERVED_DATABASE,
    TABLE,
    TBNAME,
    InvalidName,
    NameKind,
    check_name,
    name_problem,
    path_under,
)
from airflow_stream_provider.storage import Location, is_remote, table_store
from airflow_stream_provider.warehouse import mapping, writer
from airflow_stream_provider.warehouse.types import arrow_type, from_json_value, parse_type, to_json_value

ROLE = "tdengine.role"
TYPE = "tdengine.type"
CDF = {"delta.enableChangeDataFeed": "true"}
#: a folder changed this recently may change again without its modification time moving
RECENT_S = 2.0


class WarehouseError(StreamError):
    """A table statement cannot run: unknown table, bad value, existing name..."""

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        self.message = message
        self.hint = hint
        super().__init__(message + (f" ({hint})" if hint else ""))


class AttachedTableBroken(WarehouseError):
    """An attached table no longer fits its mapping (a mapped column dropped or retyped by its owner),
    or is gone: a stream over it is failed until it fits again."""

    PREFIX = "attached table "


@dataclass(frozen=True)
class Column:
    name: str
    dtype: DataType
    role: str  # "ts" (first column), "key" (composite key), "metric", "tbname" or "tag"

    def arrow_field(self) -> pa.Field:
        nullable = self.role not in ("ts", "key", "tbname")
        return pa.field(self.name, arrow_type(self.dtype), nullable=nullable,
                        metadata={ROLE: self.role, TYPE: str(self.dtype)})


@dataclass(frozen=True)
class TableInfo:
    """A supertable or regular table: one Delta table."""

    db: str
    name: str
    path: Location  # a folder, or an s3:// URL (storage)
    columns: tuple[Column, ...]
    precision: str
    #: an attached table: where its owner keeps it (else None: a table of the warehouse's own)
    attached: Location | None = None
    #: whether INSERT, DELETE and DROP may change the data (an attached table: when it was attached WRITABLE)
    writable: bool = True

    @property
    def is_super(self) -> bool:
        return any(c.role == TBNAME for c in self.columns)

    @property
    def kind(self) -> str:
        return "supertable" if self.is_super else "table"

    @property
    def qualified(self) -> str:
        return f"{self.db}.{self.name}"

    @property
    def data_columns(self) -> tuple[Column, ...]:
        """The columns an INSERT names: timestamp, composite key and metrics."""
        return tuple(c for c in self.columns if c.role in ("ts", "key", "metric"))

    @property
    def tags(self) -> tuple[Column, ...]:
        return tuple(c for c in self.columns if c.role == "tag")

    @property
    def timestamp_column(self) -> str:
        return self.columns[0].name

    @property
    def key_columns(self) -> tuple[str, ...]:
        """The row identity: (tbname, timestamp[, composite key]) as TDengine's primary key per table."""
        keys = tuple(c.name for c in self.columns if c.role in ("ts", "key"))
        return ((TBNAME,) if self.is_super else ()) + keys

    def column(self, name: str) -> Column | None:
        lowered = name.lower()
        return next((c for c in self.columns if c.name == lowered), None)

    def arrow_schema(self) -> pa.Schema:
        return pa.schema([c.arrow_field() for c in self.columns])


@dataclass(frozen=True)
class SubTable:
    db: str
    name: str
    stable: TableInfo
    tags: dict[str, object]

    @property
    def qualified(self) -> str:
        return f"{self.db}.{self.name}"


def table_columns(columns: Sequence[ColumnDefinition], tags: Sequence[ColumnDefinition] = ()) -> tuple[Column, ...]:
    """Columns of a table from CREATE [S]TABLE definitions (``ColumnDefinition``)."""
    out = []
    for i, col in enumerate(columns):
        role = "ts" if i == 0 else "key" if col.primary_key else "metric"
        out.append(Column(col.name.lower(), col.type, role))
    if tags:
        out.append(Column(TBNAME, DataType("VARCHAR", (192,)), TBNAME))
        out.extend(Column(t.name.lower(), t.type, "tag") for t in tags)
    return tuple(out)


@dataclass
class _Kept:
    """Lookups kept for the catalogs of one root: by (database, name), and database folders by
    name, each with the stamp of the folders it depends on (:meth:`Catalog._stamp`)."""

    found: dict[tuple[str, str], tuple[tuple, TableInfo | SubTable]] = field(default_factory=dict)
    folders: dict[str, tuple[tuple, Path]] = field(default_factory=dict)

    @staticmethod
    def keep(kept: dict, key: object, value: tuple) -> None:
        if len(kept) >= KEPT_LOOKUPS:
            kept.clear()
        kept[key] = value


#: at most this many lookups kept for a root (then they start again)
KEPT_LOOKUPS = 100_000
_kept: dict[Path, _Kept] = {}
_kept_lock = threading.Lock()


def _check_name(name: str, kind: NameKind) -> str:
    """``name`` in lower case, once it obeys the name rule (:mod:`~airflow_stream_provider.model.names`)."""
    try:
        return check_name(name, kind)
    except InvalidName as err:
        raise WarehouseError(str(err)) from None


def _new_table_name(name: str) -> str:
    """The name of a table or subtable being created: the name rule, and ``tbname`` is reserved."""
    lowered = _check_name(name, TABLE)
    if lowered == TBNAME:
        raise WarehouseError(f"{name} is reserved for the subtable name column")
    return lowered


def _write_new(path: Path, payload: dict) -> bool:
    """Create ``path`` holding ``payload`` unless it exists; True when this call created it."""
    make_dirs(path.parent)
    return create_text(path, json.dumps(payload))


class Catalog:
    """Databases, tables and subtables under one warehouse root."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        #: where the tables themselves live: under ``root``, or on an object store
        self.store = table_store(self.root)
        self._tables: dict[Location, TableInfo] = {}
        self._precisions: dict[str, str] = {}
        with _kept_lock:  # the lookups kept for every catalog of this root (a server makes one a request)
            self._kept = _kept.setdefault(self.root, _Kept())

    def _stamp(self, *folders: Path) -> tuple | None:
        """The modification times (and inodes) of ``folders`` (0 for one that is absent); None when
        one changed in the last :data:`RECENT_S` seconds, or the tables are on an object store."""
        if self.store.remote:
            return None
        recent = time.time_ns() - int(RECENT_S * 1e9)
        out = []
        for folder in folders:
            try:
                found = os.stat(folder)
            except FileNotFoundError:
                out.append((0, 0))
                continue
            if found.st_mtime_ns > recent:
                return None
            out.append((found.st_mtime_ns, found.st_ino))
        return tuple(out)

    def changed(self) -> None:
        """Forget the kept lookups (this process changed the catalog)."""
        self._kept.found.clear()
        self._kept.folders.clear()

    # databases ---------------------------------------------------------------------------------

    def databases(self) -> list[str]:
        if not self.root.is_dir():
            return []
        return sorted(p.name for p in self.root.iterdir() if (p / ".database.json").is_file())

    def path(self, *names: str) -> Path:
        """The folder or file of ``<db>[/<table or .subtables>[/<file>]]`` under the root, refused
        (WarehouseError) when it resolves to a place outside the root."""
        try:
            return path_under(self.root, *names)
        except InvalidName as err:
            raise WarehouseError(str(err)) from None

    def database_path(self, db: str) -> Path:
        name = _check_name(db, DATABASE)
        kept = self._kept.folders.get(name)
        stamp = self._stamp(self.root)
        if kept is not None and stamp is not None and kept[0] == stamp:
            return kept[1]
        folder = self.path(name)
        if stamp is not None:
            self._kept.keep(self._kept.folders, name, (stamp, folder))
        return folder

    def _attachment(self, db: str, name: str) -> Path:
        """The file recording the attached table ``name`` of ``db``."""
        return self.path(_check_name(db, DATABASE), ".attached", f"{_check_name(name, TABLE)}.json")

    def _registry(self, db: str, name: str) -> Path:
        """The file recording subtable ``name`` of ``db``."""
        return self.path(_check_name(db, DATABASE), ".subtables", f"{_check_name(name, TABLE)}.json")

    def subtable_entry(self, db: str, name: str) -> Path:
        """The file recording subtable ``name`` of ``db`` (it exists while the subtable does): a writer
        that keeps a subtable's name from write to write looks at it, not at the whole catalog."""
        return self._registry(db, name)

    def precision(self, db: str) -> str:
        """The database's precision; raises when the database does not exist."""
        folder = self.database_path(db)
        db = db.lower()
        if db in self._precisions:
            return self._precisions[db]
        meta = folder / ".database.json"
        try:
            precision = self._precisions[db] = read_json_object(meta, ("precision",))["precision"]
            return precision
        except FileNotFoundError:
            raise WarehouseError(
                f"database {db} does not exist", hint=did_you_mean(db, self.databases())) from None

    def create_database(self, name: str, precision: str, if_not_exists: bool, extra: dict | None = None) -> bool:
        """:param extra: more facts recorded with the database (an IoTDB database's path)."""
        name = _check_name(name, DATABASE)
        if name == CQ_NAMESPACE:
            raise WarehouseError(f"database name {name} {RESERVED_DATABASE}")
        created = _write_new(self.database_path(name) / ".database.json",
                             {**(extra or {}), "precision": precision, "created": datetime.now(UTC).isoformat()})
        if not created and not if_not_exists:
            raise WarehouseError(f"database {name} already exists")
        self.changed()
        return created

    def drop_database(self, name: str, if_exists: bool) -> bool:
        folder = self.database_path(name)
        if not (folder / ".database.json").is_file():
            if if_exists:
                return False
            raise WarehouseError(f"database {name} does not exist", hint=did_you_mean(name, self.databases()))
        if self.store.remote:
            self.store.remove(self.store.join(name.lower()))
        shutil.rmtree(folder)
        self.changed()
        self._tables.clear()
        self._precisions.pop(name.lower(), None)
        return True

    # tables ------------------------------------------------------------------------------------

    def table_path(self, db: str, name: str) -> Location:
        local = self.path(_check_name(db, DATABASE), _check_name(name, TABLE))
        return self.store.join(local.parent.name, local.name) if self.store.remote else local

    def names(self, db: str) -> list[str]:
        folder = self.database_path(db)
        tables = self.store.tables(folder.name)
        subs = [p.stem for p in (folder / ".subtables").glob("*.json")]
        return sorted(tables + subs + self.attached_names(db))

    def attached_names(self, db: str) -> list[str]:
        return sorted(p.stem for p in (self.database_path(db) / ".attached").glob("*.json"))

    def lookup(self, name: TableName, db: str) -> TableInfo | SubTable | None:
        """The table ``name`` in ``db``, or None when there is none."""
        folder = self.database_path(db)
        lowered = name.name.lower()
        if name_problem(lowered, TABLE) is not None:
            return self._lookup(name, db)  # (which says what is wrong, the database's absence first)
        key = (folder.name, lowered)
        stamp = self._stamp(self.root, folder, folder / ".subtables", folder / ".attached")
        kept = self._kept.found.get(key)
        if kept is not None and stamp is not None and kept[0] == stamp:
            return kept[1]
        found = self._lookup(name, db)
        if stamp is not None and found is not None and (isinstance(found, SubTable) or found.attached is None):
            self._kept.keep(self._kept.found, key, (stamp, found))
        return found

    def _lookup(self, name: TableName, db: str) -> TableInfo | SubTable | None:
        self.precision(db)
        lowered = name.name.lower()
        path = self.table_path(db, lowered)
        if self.store.is_table(path):
            return self._info(db, lowered, path)
        attachment = self._attachment(db, lowered)
        if attachment.is_file():
            return self._attached_info(db, lowered, read_json_object(attachment, ("location", "columns")))
        registry = self._registry(db, lowered)
        try:
            entry = read_json_object(registry, ("stable", "tags"))
        except FileNotFoundError:
            return None
        stable = self._info(db, entry["stable"], self.table_path(db, entry["stable"]))
        types = {t.name: t.dtype for t in stable.tags}
        tags = {k: from_json_value(v, types[k]) for k, v in entry["tags"].items()}
        return SubTable(db.lower(), lowered, stable, tags)

    def resolve(self, name: TableName, db: str, what: str = "table") -> TableInfo | SubTable:
        found = self.lookup(name, db)
        if found is None:
            raise WarehouseError(f"{what} {db.lower()}.{name.name.lower()} does not exist",
                                 hint=did_you_mean(name.name, self.names(db)))
        return found

    def _info(self, db: str, name: str, path: Location) -> TableInfo:
        cached = self._tables.get(path)
        if cached is not None:
            return cached
        with writer.latest(path) as table:  # a local table's kept one: no log read from the start
            fields = table.schema().fields
        columns = tuple(Column(f.name, parse_type(f.metadata[TYPE]), f.metadata[ROLE]) for f in fields
                        if ROLE in f.metadata)
        info = TableInfo(db.lower(), name, path, columns, self.precision(db))
        self._tables[path] = info
        return info

    def _attached_info(self, db: str, name: str, entry: dict) -> TableInfo:
        """The attached table of ``entry``, its mapping checked against the table's schema as it is now."""
        location = entry["location"]
        label = f"{db.lower()}.{name}"
        try:
            described = mapping.describe(location)
            columns = mapping.check(location, label, [(c["name"], c["source"], c["role"]) for c in entry["columns"]],
                                    described, {c["source"]: c["type"] for c in entry["columns"] if "type" in c})
        except mapping.MappingError as err:
            raise AttachedTableBroken(f"{AttachedTableBroken.PREFIX}{label}: {err.message}", hint=err.hint) from None
        mapping.register(location, columns)
        path: Location = location if location.startswith("s3://") else Path(location)
        return TableInfo(db.lower(), name, path, tuple(Column(c.name, c.dtype, c.role) for c in columns),
                         self.precision(db), attached=location, writable=bool(entry.get("writable")))

    def attach(self, db: str, name: str, location: str, wanted: list[tuple[str, str, str]], *, writable: bool,
               enable_change_feed: bool, if_not_exists: bool) -> TableInfo | None:
        """Record the Delta table at ``location`` as table ``name`` of ``db`` under the mapping ``wanted``
        ((model name, table column, role), the timestamp first); None when ``if_not_exists`` and the
        name is taken. Nothing of the table is written, unless ``enable_change_feed`` turns its change
        data feed on (one commit of its properties)."""
        name = _new_table_name(name)
        label = f"{db.lower()}.{name}"
        if self.lookup(TableName(name), db) is not None:
            if if_not_exists:
                return None
            raise WarehouseError(f"table {label} already exists")
        inside = self.store.contains(location) or (not location.startswith("s3://") and (
            self.root.resolve() == Path(location) or self.root.resolve() in Path(location).parents))
        if inside:
            raise WarehouseError(f"{location} is inside the warehouse: its tables are read by name, not attached")
        try:
            described = mapping.describe(location)
            columns = mapping.check(location, label, wanted, described)
            if not described.change_feed:
                if not enable_change_feed:
                    raise WarehouseError(mapping.missing_feed_message(location, label))
                mapping.enable_change_feed(location)
        except mapping.MappingError as err:
            raise WarehouseError(err.message, hint=err.hint) from None
        entry = {"location": location, "writable": writable, "created": datetime.now(UTC).isoformat(),
                 "columns": [{"name": c.name, "source": c.source, "role": c.role, "type": c.delta_type}
                             for c in columns]}
        self.changed()
        if not _write_new(self._attachment(db, name), entry):
            if if_not_exists:
                return None
            raise WarehouseError(f"table {label} already exists")
        return self._attached_info(db, name, entry)

    def detach(self, info: TableInfo) -> None:
        """Forget the attached table ``info``; its data stays where its owner keeps it."""
        self._attachment(info.db, info.name).unlink(missing_ok=True)
        self.changed()
        mapping.unregister(info.path)

    def forget(self, path: Location) -> None:
        """Read the table at ``path`` again on its next lookup (its schema changed), in this process
        and, through its database folder's modification time, in the others."""
        self._tables.pop(path, None)
        self.changed()
        if not is_remote(path):
            with contextlib.suppress(OSError):
                os.utime(Path(path).parent)

    def create_table(self, db: str, name: str, columns: tuple[Column, ...], if_not_exists: bool) -> bool:
        from deltalake import DeltaTable

        name = _new_table_name(name)
        if self.lookup(TableName(name), db) is not None:
            if if_not_exists:
                return False
            raise WarehouseError(f"table {db.lower()}.{name} already exists")
        info = TableInfo(db.lower(), name, self.table_path(db, name), columns, self.precision(db))
        self.changed()
        try:
            DeltaTable.create(str(info.path), info.arrow_schema(), mode="error", name=name,
                              description=f"TDengine {info.kind} {info.qualified}", configuration=CDF)
        except Exception as err:
            if "exists" in str(err).lower():
                if if_not_exists:
                    return False
                raise WarehouseError(f"table {info.qualified} already exists") from None
            raise
        return True

    def existing_subtable(self, stable: TableInfo, name: str, label: str) -> SubTable | None:
        """Subtable ``name`` of ``stable``, or None when no table has that name.

        Raises when the name belongs to another supertable's subtable or to a table of its own.
        """
        found = self.lookup(TableName(name), stable.db)
        if found is None:
            return None
        if not isinstance(found, SubTable):
            raise WarehouseError(f"{label}: {stable.db}.{name.lower()} is not a subtable of {stable.qualified}")
        if found.stable.name != stable.name:
            raise WarehouseError(f"{label}: subtable {found.name} belongs to {found.stable.qualified}, "
                                 f"not {stable.qualified}")
        return found

    def create_subtable(self, stable: TableInfo, name: str, tags: dict[str, object],
                        if_not_exists: bool) -> SubTable:
        """Register subtable ``name``; when it exists, return the registered one (its tags win)."""
        name = _new_table_name(name)
        label = f"{stable.db}.{name}"
        existing = self.existing_subtable(stable, name, label)
        if existing is None:
            self.changed()
            entry = {"stable": stable.name, "tags": {k: to_json_value(v) for k, v in tags.items()},
                     "created": datetime.now(UTC).isoformat()}
            if _write_new(self._registry(stable.db, name), entry):
                return SubTable(stable.db, name, stable, dict(tags))
            existing = self.existing_subtable(stable, name, label)
        if not if_not_exists:
            raise WarehouseError(f"table {label} already exists")
        if existing is None:  # another writer created it after the first read and dropped it before the second
            raise WarehouseError(f"table {label} was dropped while it was being created")
        return existing

    def subtables(self, stable: TableInfo) -> list[str]:
        out = []
        for entry in (self.database_path(stable.db) / ".subtables").glob("*.json"):
            if read_json_object(entry, ("stable",))["stable"] == stable.name:
                out.append(entry.stem)
        return sorted(out)

    def drop_subtable_entry(self, sub: SubTable) -> None:
        self._registry(sub.db, sub.name).unlink(missing_ok=True)
        self.changed()

    def drop_table_files(self, info: TableInfo) -> None:
        folder = self.table_path(info.db, info.name)  # the names checked, the path inside the root
        subtables = self.subtables(info)
        self.store.remove(folder)  # first: a table whose files could not all go keeps its subtables
        for sub in subtables:
            self._registry(info.db, sub).unlink(missing_ok=True)
        self._tables.pop(info.path, None)
        self.changed()

